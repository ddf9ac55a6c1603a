/* select.c - which backend devices a layer's devices are (KVS_DEVICES);
 * called by the backends while they open (dev_int.h). */
#include <stdio.h>

#include "common/err.h"
#include "device/dev_int.h"

int dev_select(const dev_opts *o, int nback, const char *what, dev_layer *L)
{
    char list[DEV_MAX * 4 + 1] = "";
    size_t used = 0;
    L->nback = nback;
    if (o->ndevices <= 0) {
        L->n = nback < DEV_MAX ? nback : DEV_MAX;
        for (int i = 0; i < L->n; i++)
            L->map[i] = i;
        return 0;
    }
    if (o->ndevices > DEV_MAX)
        return err_set(KVS_ECONFIG, "KVS_DEVICES: %d entries, at most %d", o->ndevices, DEV_MAX);
    for (int i = 0; i < o->ndevices; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "",
                                 o->devices[i]);
    for (int i = 0; i < o->ndevices; i++) {
        if (o->devices[i] < 0 || o->devices[i] >= nback)
            return err_set(KVS_ECONFIG, "KVS_DEVICES='%s': device %d does not exist: %s %d "
                           "device%s (0..%d)", list, o->devices[i], what, nback,
                           nback == 1 ? "" : "s", nback - 1);
        L->map[i] = o->devices[i];
    }
    L->n = o->ndevices;
    return 0;
}
