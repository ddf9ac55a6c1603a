/* bench.h - sub-commands of kvs-bench implemented in their own files. */
#ifndef KVS_TOOLS_BENCH_H
#define KVS_TOOLS_BENCH_H

#include <stdbool.h>

/* `kvs-bench reduce [options]`: reduction-engine bandwidth vs memcpy
 * (tools/bench_reduce.c).  argv[0] is "reduce".  Returns the exit code. */
int bench_reduce_main(int argc, char **argv);

/* `kvs-bench zmq [--sizes LIST] [--iters N]`: the floor under kvsd: a raw
 * ZeroMQ DEALER -> ROUTER echo between two processes over loopback TCP, no
 * kvsd code on the path (tools/bench_zmq.c). */
int bench_zmq_main(int argc, char **argv);

/* `kvs-bench --store device --devices N [...]`: local reduce + broadcast
 * over N devices, flat vs tree vs NCCL (tools/bench_device.c). */
int bench_device_main(int argc, char **argv);
/* `kvs-bench --keys N` / `kvs-bench --model NAME`: rounds of many keys
 * (tools/bench_keys.c).  bench_keys_wanted: argv asks for that mode. */
bool bench_keys_wanted(int argc, char **argv);
int bench_keys_main(int argc, char **argv);
/* `kvs-bench optim`: one server-side update per optimizer next to one push's
 * add into the round buffer, through the reduction pool (tools/bench_optim.c). */
int bench_optim_main(int argc, char **argv);

/* `kvs-bench codec`: gradient compression's encode/decode speed on one
 * core (tools/bench_codec.c). */
int bench_codec_main(int argc, char **argv);

/* `kvs-bench mixed`: a small key's pushpull latency while big keys' rounds
 * run (tools/bench_mixed.c). */
int bench_mixed_main(int argc, char **argv);

/* `kvs-bench rowsparse`: an embedding table as a row-sparse key: steps that
 * push and pull a few rows, next to dense rounds (tools/bench_rsp.c). */
int bench_rsp_main(int argc, char **argv);

#endif
