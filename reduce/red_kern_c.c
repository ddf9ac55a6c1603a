/* red_kern_c.c - the kernels in portable C (baseline ISA of the target). */
#include "reduce/red_kern.h"

#define KSFX c
#define KATTR
#include "reduce/red_kern_body.h"
