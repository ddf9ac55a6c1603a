/* cfgvars.h - every environment variable of kvsd, one line each.
 *
 * CFG_VARS(X) calls X(NAME, KIND, FIELD, DEFAULT, MIN, MAX, WORDS, DOC) once
 * per variable.  From this one list common/config.c parses the environment
 * (cfg_load), writes the start-up log line (cfg_log), and tests check that
 * docs/ref/env.md and the man pages' ENVIRONMENT sections name exactly these
 * variables.  To add a variable: one line here and, for a parsed one, its
 * field in cfg (config.h); nothing else reads the environment.
 *
 *   KIND     INT  int field: an integer in [MIN, MAX]; with WORDS, also one
 *                 of them, meaning MAX+1, MAX+2, ... in their order
 *            U64  uint64_t field: an integer in [MIN, MAX]
 *            DBL  double field: a finite number in [MIN, MAX]
 *            BOOL bool field: 1/0, true/false, yes/no, on/off
 *            STR  char array field: the text (too long for the field: refused)
 *            ENUM int-sized enum field: the index of the WORDS entry it names
 *            SPECIAL parsed by its own code in config.c (no FIELD: _)
 *            OFF  a ps-lite switch for what kvsd does not implement: unset
 *                 or 0 is accepted, anything else refused (no FIELD: _)
 *            EXT  read outside the C code (kvs-launch, the Python package);
 *                 listed here so that the documentation stays complete
 *   DEFAULT  a C value of the field's type (STR: a string literal); it may
 *            lie outside [MIN, MAX] to mean "unset" (-1, 0).  Constants
 *            come from common/datapath.h, prio.h and topo.h (config.c
 *            includes them)
 *   WORDS    "a|b|c" or NULL
 *   DOC      one line for the start-up log, --help-style listings and review;
 *            docs/ref/env.md says the rest
 */
#ifndef KVS_COMMON_CFGVARS_H
#define KVS_COMMON_CFGVARS_H

#define CFG_VARS(X)                                                                                   \
    X(DMLC_ROLE, ENUM, role, CFG_ROLE_NONE, 0, 0, "none|scheduler|server|worker", "this process's role") \
    X(DMLC_PS_ROOT_URI, STR, root_uri, "", 0, 0, NULL, "the scheduler's IPv4 address or host name") \
    X(DMLC_PS_ROOT_PORT, INT, root_port, -1, 0, 65535, NULL, "the scheduler's port (0: ephemeral, scheduler only)") \
    X(DMLC_NUM_SERVER, INT, num_server, 0, 1, 1 << 16, NULL, "servers in the job") \
    X(DMLC_NUM_WORKER, INT, num_worker, 0, 1, 1 << 16, NULL, "workers in the job") \
    X(DMLC_NODE_HOST, STR, node_host, "", 0, 0, NULL, "the IPv4 address this node advertises") \
    X(DMLC_INTERFACE, STR, interface, "", 0, 0, NULL, "take the advertised address from this interface") \
    X(DMLC_WORKER_ID, INT, worker_id, -1, 0, (1 << 16) - 1, NULL, "preferred worker rank") \
    X(DMLC_SERVER_ID, INT, server_id, -1, 0, (1 << 16) - 1, NULL, "preferred server rank") \
    X(DMLC_LOCAL, BOOL, local, false, 0, 0, NULL, "servers listen on ipc:// (every node on one host)") \
    X(TMPDIR, STR, tmpdir, "/tmp", 0, 0, NULL, "DMLC_LOCAL: directory of the servers' ipc:// sockets") \
    X(DMLC_PS_VAN_TYPE, ENUM, van, CFG_VAN_ZMQ, 0, 0, "zmq|p3", "transport: zmq, or p3 (sliced, prioritised)") \
    X(DMLC_PS_WATER_MARK, INT, water_mark, 1000, 1, 1 << 30, NULL, "ZeroMQ high-water mark (messages)") \
    X(DMLC_ENABLE_RDMA, OFF, _, 0, 0, 0, NULL, "ps-lite RDMA van: not implemented, refused") \
    X(DMLC_ENABLE_UCX, OFF, _, 0, 0, 0, NULL, "ps-lite UCX van: not implemented, refused") \
    X(PS_VERBOSE, INT, verbose, 0, 0, 2, NULL, "log level: 0 warnings, 1 configuration, 2 messages") \
    X(PS_HEARTBEAT_INTERVAL, DBL, hb_interval_s, 5, 0.01, 3600, NULL, "seconds between heartbeats") \
    X(PS_HEARTBEAT_TIMEOUT, DBL, hb_timeout_s, 60, 0.05, 86400, NULL, "seconds of silence before a node is dead") \
    X(PS_RESEND, BOOL, resend, false, 0, 0, NULL, "accepted for compatibility; nothing is resent") \
    X(PS_RESEND_TIMEOUT, INT, resend_timeout_ms, 1000, 1, 3600 * 1000, NULL, "accepted for compatibility (ms)") \
    X(MXNET_KVSTORE_BIGARRAY_BOUND, U64, bigarray_bound, 1000000, 1, UINT64_MAX, NULL, "elements from which a key is split over all servers") \
    X(MXNET_KVSTORE_REDUCTION_NTHREADS, INT, reduction_nthreads, 4, 1, 1024, NULL, "threads summing big arrays") \
    X(MXNET_KVSTORE_SLICE_THRESHOLD, U64, slice_threshold, 40000, 1, UINT64_MAX, NULL, "p3 slice size (elements)") \
    X(MXNET_KVSTORE_USETREE, BOOL, use_tree, false, 0, 0, NULL, "device stores sum along planned trees") \
    X(MXNET_KVSTORE_LOGTREE, BOOL, tree_log, false, 0, 0, NULL, "print the link matrix and trees") \
    X(MXNET_KVSTORE_TREE_ARRAY_BOUND, U64, tree_array_bound, 10000000, 1, UINT64_MAX, NULL, "elements from which tree stores slice an array") \
    X(MXNET_KVSTORE_TREE_BACKTRACK, BOOL, tree_backtrack, false, 0, 0, NULL, "backtracking planner instead of Kernighan-Lin") \
    X(MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY, DBL, tree_penalty, 0.7, 1e-6, 1.0, NULL, "planner: weight factor of a used link") \
    X(MXNET_ENABLE_GPU_P2P, BOOL, gpu_p2p, true, 0, 0, NULL, "device-to-device copies peer to peer") \
    X(MXNET_UPDATE_ON_KVSTORE, BOOL, update_on_kvstore, true, 0, 0, NULL, "servers apply the optimizer") \
    X(KVS_TOPOLOGY, STR, topology, "", 0, 0, NULL, "link matrix for the tree planner (rows ';', weights ',')") \
    X(KVS_TREE_OPTIMIZE, BOOL, tree_optimize, true, 0, 0, NULL, "planner: joint local search over all trees") \
    X(KVS_TREE_EFFORT, U64, tree_effort, 100, 0, 10000, NULL, "planner: search budget (percent)") \
    X(KVS_TREE_DEPTH_SLACK, INT, tree_depth_slack, 1, 0, 1, NULL, "planner: a tree may go one round deeper") \
    X(KVS_TREE_WEIGHTED, BOOL, tree_weighted, true, 0, 0, NULL, "planner: several weighted trees per root") \
    X(KVS_TREE_MAX_TREES, INT, tree_max_trees, 0, 0, 4 * TREE_MAX_N, NULL, "planner: trees of a weighted plan (0: 4n)") \
    X(KVS_TREE_MIN_SLICE, U64, tree_min_slice, 262144, 0, UINT64_MAX, NULL, "weighted plans: smallest slice (bytes)") \
    X(KVS_SIM_DEVICES, INT, sim_devices, 0, 0, 64, NULL, "simulated devices (0: CUDA's)") \
    X(KVS_SIM_LINK_GBPS, DBL, sim_link_gbps, 0, 0, 1e6, NULL, "simulated copy pacing, GB/s (0: none)") \
    X(KVS_DEVICES, SPECIAL, _, 0, 0, 0, NULL, "device ordinals kvsd uses, in order (cfg_get_devices)") \
    X(KVS_CUDA_PLUGIN, STR, cuda_plugin, "", 0, 0, NULL, "path of libkvs_cuda.so") \
    X(KVS_START_TIMEOUT, DBL, start_timeout_s, 120, 0.1, 86400, NULL, "seconds for every node to register") \
    X(KVS_MAX_MESSAGE, U64, max_message, 4ull << 30, 64, UINT64_MAX, NULL, "largest data message accepted (bytes)") \
    X(KVS_CHUNK_BYTES, U64, chunk_bytes, DP_CHUNK_BYTES_DEFAULT, 4096, 1ull << 40, NULL, "largest data message sent (bytes)") \
    X(KVS_RSP_CHUNK_BYTES, U64, rsp_chunk_bytes, 256ull << 20, 4096, 1ull << 40, NULL, "largest chunk of a row-sparse key (bytes, whole rows)") \
    X(KVS_CMA, BOOL, cma, true, 0, 0, NULL, "same-host direct memory copies") \
    X(KVS_LINK_GBPS, DBL, link_gbps, 0, 0, 1e5, NULL, "each host's link rate (Gbit/s): data connections to other hosts paced at their share (0: none)") \
    X(KVS_FUSE_BYTES, U64, fuse_bytes, DP_FUSE_BYTES_DEFAULT, 0, 1u << 30, NULL, "largest fused message (0: no fusion, else >= 4096)") \
    X(KVS_JOB_NICE, INT, job_nice, DP_JOB_NICE_DEFAULT, 0, 19, "idle|auto", "niceness of a server's job threads") \
    X(KVS_P3_CREDIT, U64, p3_credit, DP_P3_CREDIT_DEFAULT, 0, 1ull << 40, NULL, "p3 bytes in flight per server (0: no bound)") \
    X(KVS_MALLOC_TUNE, BOOL, malloc_tune, false, 0, 0, NULL, "libkvs: tune glibc malloc for large buffers") \
    X(KVS_PORT, INT, port, 0, 0, 65535, NULL, "server bind port (0: ephemeral)") \
    X(KVS_PORT_FILE, STR, port_file, "", 0, 0, NULL, "file the bound port is written to") \
    X(KVS_METRICS_PORT, INT, metrics_port, 0, 0, 65535, NULL, "Prometheus /metrics port (0: off)") \
    X(KVS_METRICS_ADDR, STR, metrics_addr, "127.0.0.1", 0, 0, NULL, "IPv4 address /metrics listens on (loopback unless asked)") \
    X(KVS_TRACE, STR, trace_path, "", 0, 0, NULL, "libkvs: Chrome trace file") \
    X(KVS_HANDSHAKE_TIMEOUT, DBL, handshake_timeout_s, 10, 0.1, 3600, NULL, "seconds a new connection has to identify itself") \
    X(KVS_MAX_QUEUED_BYTES, U64, max_queued_bytes, 4ull << 30, 0, UINT64_MAX, NULL, "bytes a server keeps waiting per worker (0: no bound)") \
    X(KVS_MAX_QUEUED_REQUESTS, U64, max_queued_reqs, 0, 0, UINT64_MAX, NULL, "requests a server keeps waiting per worker (0: no bound)") \
    X(KVS_MAX_KEYS, U64, max_keys, 1ull << 22, 0, UINT64_MAX, NULL, "key parts one server holds for the job (0: no bound)") \
    X(KVS_MAX_KEY_BYTES, U64, max_key_bytes, 0, 0, UINT64_MAX, NULL, "bytes of key parts one server holds for the job (0: no bound)") \
    X(KVS_MAX_PENDING_CONN, INT, max_pending_conn, 64, 1, 1 << 20, NULL, "unidentified connections a daemon keeps") \
    X(KVS_SECRET_FILE, SPECIAL, _, 0, 0, 0, NULL, "file holding the job secret") \
    X(KVS_SECRET, SPECIAL, _, 0, 0, 0, NULL, "the job secret itself") \
    X(KVS_SECURITY, SPECIAL, _, 0, 0, 0, "none|auth|curve", "none, auth or curve") \
    X(KVS_CURVE_SERVER_KEY, STR, curve_server_key, "", 0, 0, NULL, "CURVE: the listeners' key file") \
    X(KVS_CURVE_CLIENT_KEY, STR, curve_client_key, "", 0, 0, NULL, "CURVE: this node's key file") \
    X(KVS_CURVE_AUTHORIZED, STR, curve_authorized, "", 0, 0, NULL, "CURVE: file of the client keys let in") \
    X(KVS_CHECKPOINT_DIR, STR, checkpoint_dir, "", 0, 0, NULL, "servers' automatic checkpoints") \
    X(KVS_CHECKPOINT_EVERY, U64, checkpoint_every, 0, 0, UINT64_MAX, NULL, "rounds between automatic checkpoints (0: off)") \
    X(KVS_REPLICAS, INT, replicas, 0, 0, 1, NULL, "dist_sync: backups of each server's key range (0 or 1)") \
    X(KVS_ELASTIC, BOOL, elastic, false, 0, 0, NULL, "workers may leave and join while the job runs") \
    X(KVS_MIN_WORKERS, INT, min_workers, 0, 0, 1 << 16, NULL, "KVS_ELASTIC: fewest workers the job goes on with (0: DMLC_NUM_WORKER)") \
    X(KVS_MAX_WORKERS, INT, max_workers, 0, 0, 1 << 16, NULL, "KVS_ELASTIC: most workers the job admits (0: DMLC_NUM_WORKER)") \
    X(KVS_SCHEDULER_GRACE, DBL, sched_grace_s, 0, 0, 86400, NULL, "seconds servers and workers go on without the scheduler, waiting for a restarted one (0: its death ends the job)") \
    X(KVS_TEST_CKPT_CRASH, EXT, _, 0, 0, 0, NULL, "tests only: crash point of the fault-injecting server build") \
    X(KVS_BIN_DIR, EXT, _, 0, 0, 0, NULL, "kvs-launch: where kvs-scheduler and kvs-server are") \
    X(KVS_LIBRARY, EXT, _, 0, 0, 0, NULL, "Python package: path of libkvs.so") \
    X(KVS_LOCAL_SIZE, EXT, _, 0, 0, 0, NULL, "kvsd.torch: processes of the job on this host") \
    X(KVS_LOCAL_RANK, EXT, _, 0, 0, 0, NULL, "kvsd.torch: this process's index among them")

#endif
