/*
 * tests.h - the table of integration tests: X(name, deadline in seconds).
 * Each entry is defined with IT_TEST(name) in one of the test_*.c files and
 * runs in its own forked child (runner.c); the deadline covers the whole test
 * (it is multiplied by it_slow).
 */
#ifndef KVS_TESTS_INTEG_TESTS_H
#define KVS_TESTS_INTEG_TESTS_H

#include "harness.h"

/* Tests known to fail now and then on a loaded machine, each with what is
 * seen when it does: X(name, "symptom").  The runner reruns one of these
 * once when it fails and reports it apart (runner.c); the rule for this list
 * is in CONTRIBUTING.md (a test leaves it when its cause is fixed). */
#define IT_FLAKY_LIST(X)                                                                   \
    X(kill_server_direct_2x2, "worker 1 stays in kvs_wait_all past 10 s after server 1 is killed") \
    X(kill_worker_2x3, "kvs_close returns KVS_OK where KVS_EPEERDEAD is expected")         \
    X(server_enomem_1x1, "RLIMIT_AS headroom taken from VmSize before the thread arenas exist") \
    X(sum_1x4, "FUSED_REPLY record says sender 0")                                         \
    X(sum_3x4, "times out at 40 s under load; FUSED_REPLY record says sender 0")           \
    X(guard_nofile_2x2, "fails once under load average 10, passes alone")                 \
    X(blast_2x2, "fails once under load, passes on rerun")                                 \
    X(blast_secret_2x2, "a worker slow past its deadline under load average 7")            \
    X(garbage_2x2, "times out at 30 s under load average 10")

#define IT_TEST_LIST(X)                                                        \
    /* test_sum.c: exact sums of dist_sync, the local store, async */          \
    X(worker_selftest, 30)                                                     \
    X(local_store, 30)                                                         \
    X(sum_1x1, 60)                                                             \
    X(sum_1x4, 60)                                                             \
    X(sum_2x2, 60)                                                             \
    X(sum_3x3, 60)                                                             \
    X(sum_3x4, 60)                                                             \
    X(pushpull_2x3, 60)                                                        \
    X(callbacks_2x3, 60)                                                       \
    X(dup_keys_2x2, 60)                                                        \
    X(dup_pushpull_3x2, 60)                                                    \
    X(pipeline_2x2, 60)                                                        \
    X(pipeline_pushpull_3x3, 60)                                               \
    X(slow_worker_2x3, 60)                                                     \
    X(split_tiny_3x2, 60)                                                      \
    X(edge_keys_3x2, 60)                                                       \
    X(threads_2x2, 60)                                                         \
    X(two_stores_2x3, 60)                                                      \
    X(ranks_unique_2x4, 60)                                                    \
    X(big_key_2x2, 180)                                                        \
    X(big_key_socket_2x2, 180)                                                 \
    X(direct_copy_2x3, 60)                                                     \
    X(direct_copy_refused_1x2, 60)                                             \
    X(barrier_1x3, 60)                                                         \
    X(api_2x3, 60)                                                             \
    X(api_async_1x2, 60)                                                       \
    X(async_2x3, 60)                                                           \
    /* test_sparse.c: row-sparse keys (sums, lazy updates, async, errors) */   \
    X(sparse_sum_1x2, 90)                                                      \
    X(sparse_sum_3x3, 90)                                                      \
    X(sparse_chunks_2x2, 90)                                                   \
    X(sparse_pushpull_2x3, 90)                                                 \
    X(sparse_lazy_sgd_2x2, 90)                                                 \
    X(sparse_lazy_adam_2x2, 90)                                                \
    X(sparse_async_2x2, 90)                                                    \
    X(sparse_errors_2x2, 90)                                                   \
    /* test_group.c: local groups, per-host sums, layouts, failures, bytes */ \
    X(group_sum_1x3, 90)                                                       \
    X(group_pushpull_2x3, 90)                                                  \
    X(group_chunks_2x3, 90)                                                    \
    X(group_threads_2x3, 90)                                                   \
    X(group_agg_off_2x3, 90)                                                   \
    X(group_async_2x3, 60)                                                     \
    X(group_async_agg_2x3, 60)                                                 \
    X(group_mixed_2x4, 90)                                                     \
    X(group_pulls_2x4, 90)                                                     \
    X(group_pulls_left_1x3, 90)                                                \
    X(group_layout_given_1x3, 60)                                              \
    X(group_layout_dup_1x3, 60)                                                \
    X(group_layout_size_1x3, 60)                                               \
    X(group_layout_partial_1x3, 60)                                            \
    X(group_agg_mismatch_1x3, 60)                                              \
    X(group_agg_min_mismatch_1x3, 60)                                          \
    X(group_agg_min_default_mismatch_1x3, 60)                                  \
    X(group_p3_order_1x2, 90)                                                  \
    X(group_member_killed_1x3, 60)                                             \
    X(group_member_stopped_1x3, 60)                                            \
    X(group_member_killed_pulls_1x3, 60)                                       \
    X(group_member_killed_devices_1x3, 60)                                     \
    X(group_member_killed_trees_1x3, 60)                                       \
    X(group_bytes_1x3, 180)                                                    \
    X(group_pull_bytes_1x3, 180)                                               \
    X(group_agg_min_1x3, 180)                                                  \
    X(group_agg_min_pulls_1x3, 180)                                            \
    X(group_agg_min_host_1x3, 180)                                             \
    X(group_servers_2x2, 180)                                                  \
    X(group_devices_1x3, 180)                                                  \
    X(group_dist_device_1x3, 180)                                              \
    X(group_dist_device_tree_1x3, 180)                                         \
    X(group_dist_device_trees_across_1x3, 180)                                 \
    X(group_dist_device_trees_mismatch_1x3, 180)                               \
    X(group_dist_device_overlap_1x3, 180)                                      \
    /* test_errors.c: API errors, bad configuration, start-up timeouts */     \
    X(create_bogus, 30)                                                        \
    X(errors_2x2, 60)                                                          \
    X(bad_env_scheduler, 60)                                                   \
    X(bad_env_server, 60)                                                      \
    X(bad_env_worker, 60)                                                      \
    X(bad_survive_settings, 60)                                                \
    /* test_elastic.c: elastic workers (KVS_ELASTIC) */                       \
    X(elastic_kill_join_4x2, 60)                                               \
    X(elastic_long_kill_join_4x2, 180)                                         \
    X(elastic_kill_join_p3_4x2, 60)                                            \
    X(elastic_full_waits_3x2, 60)                                              \
    X(elastic_full_refused_3x1, 90)                                            \
    X(elastic_die_in_push_4x2, 60)                                             \
    X(elastic_die_compressed_3x2, 60)                                          \
    X(elastic_below_min_3x1, 60)                                               \
    /* test_replica.c: replicated servers (KVS_REPLICAS=1) */                  \
    X(replica_kill_server_2x3, 120)                                            \
    X(replica_kill_server_apart_2x3, 120)                                      \
    X(replica_kill_server_optim_2x3, 120)                                      \
    X(replica_long_kill_server_2x3, 1800)                                      \
    X(replica_long_kill_server_optim_2x3, 1800)                                \
    X(replica_kill_backup_then_owner_2x3, 120)                                 \
    X(replica_kill_two_servers_2x3, 60)                                        \
    X(replica_kill_during_promotion_2x3, 90)                                   \
    X(replica_checkpoint_2x3, 120)                                             \
    X(replica_collective_after_death_2x3, 90)                                  \
    X(replica_kill_server_auth_2x3, 120)                                       \
    X(replica_kill_server_curve_2x3, 120)                                      \
    X(start_timeout_server, 30)                                                \
    X(start_timeout_worker, 30)                                                \
    X(start_timeout_scheduler, 30)                                             \
    /* test_failure.c: dead peers, garbage on the wire */                      \
    X(kill_worker_2x3, 60)                                                     \
    X(kill_worker_callback_1x2, 60)                                            \
    X(kill_server_2x2, 60)                                                     \
    X(kill_server_direct_2x2, 60)                                              \
    X(garbage_2x2, 90)                                                         \
    X(garbage_spoofed_sender_2x2, 60)                                          \
    /* test_live.c: departures, mistakes, start-up, sizes */                  \
    X(leave_while_waiting_2x2, 60)                                             \
    X(leave_before_init_2x3, 60)                                               \
    X(size_mismatch_1x2, 60)                                                   \
    X(start_timeout_registered_1x2, 60)                                        \
    X(unresolvable_root, 30)                                                   \
    X(start_waiting_lines, 40)                                                 \
    X(too_big_1x1, 60)                                                         \
    X(too_big_local, 30)                                                       \
    X(kill_scheduler_2x2, 60)                                                  \
    X(kill_scheduler_direct_2x2, 60)                                           \
    X(kill_scheduler_socket_2x2, 60)                                           \
    /* test_schedback.c: a job that outlives its scheduler */                  \
    X(sched_restart_2x2, 240)                                                  \
    X(sched_restart_lamb_2x2, 240)                                             \
    X(sched_gone_for_good_2x2, 60)                                             \
    X(sched_restart_worker_died_2x2, 60)                                       \
    /* test_security.c: refusals, secrets, bounded memory, proofs */           \
    X(refused_registration_1x1, 60)                                            \
    X(server_enomem_1x1, 90)                                                   \
    X(server_enomem_push_1x2, 90)                                              \
    X(secret_auth_sum_2x2, 60)                                                 \
    X(secret_curve_sum_2x2, 60)                                                \
    X(secret_curve_big_frames_1x1, 120)                                        \
    X(secret_refusals_1x1, 90)                                                 \
    X(outsider_2x2, 90)                                                        \
    X(cma_other_process_1x2, 60)                                               \
    X(huge_frame_rss_1x1, 60)                                                  \
    X(huge_frame_rss_secret_1x1, 60)                                           \
    X(legacy_zmtp_refused_1x1, 60)                                             \
    X(empty_frames_open_1x1, 90)                                               \
    X(ckpt_links_1x1, 90)                                                      \
    X(ckpt_dir_open_1x1, 90)                                                   \
    /* test_blast.c: every port flooded with garbage while sums stay exact */  \
    X(blast_2x2, 120)                                                          \
    X(blast_secret_2x2, 120)                                                   \
    /* test_guard.c: connections that never identify themselves */            \
    X(guard_nofile_2x2, 120)                                                   \
    X(guard_open_idle_2x1, 60)                                                 \
    X(queue_bound_1x2, 120)                                                    \
    X(keys_bound_1x2, 120)                                                     \
    /* test_keys.c: CURVE with per-node key files */                           \
    X(curve_keyfiles_2x2, 90)                                                  \
    /* test_workload.c: many keys, huge key counts, fusion */                  \
    X(many_keys_2x2, 180)                                                      \
    X(many_keys_socket_3x2, 180)                                               \
    X(many_keys_fuse_max_1x1, 150)                                             \
    X(huge_keys_2x2, 300)                                                      \
    X(many_keys_small_fuse_2x3, 180)                                           \
    X(many_keys_p3_2x2, 180)                                                   \
    X(p3_credit_2x2, 180) \
    /* test_memory.c: a worker's peak memory against the array it pushes */   \
    X(worker_memory_socket_1x1, 300)                                           \
    X(worker_memory_direct_1x1, 300)                                           \
    X(worker_memory_direct_2x2, 300)                                           \
    X(worker_memory_socket_2x2, 300)                                           \
    /* test_compress.c: gradient compression */                             \
    X(compress_2bit_2x2, 60)                                                   \
    X(compress_2bit_socket_2x2, 60)                                            \
    X(compress_2bit_p3_2x2, 60)                                                \
    X(compress_2bit_nopull_2x2, 60)                                            \
    X(compress_1bit_socket_2x2, 60)                                            \
    X(compress_1bit_p3_2x2, 60)                                                \
    X(compress_1bit_2x2, 60)                                                   \
    X(compress_topk_2x2, 60)                                                   \
    X(compress_fp16_2x2, 60)                                                   \
    X(compress_none_2x2, 60)                                                   \
    X(compress_async_2x2, 60)                                                  \
    X(compress_optim_2x2, 60)                                                  \
    X(compress_group_2x2, 60)                                                  \
    X(compress_group_fp16_2x2, 60)                                             \
    X(compress_group_floor_2x2, 60)                                            \
    X(compress_errors_2x2, 60)                                                 \
    X(compress_disagree_1x2, 60)                                               \
    X(compress_bad_bodies_1x2, 60)                                             \
    /* test_optim.c: server-side optimizers, checkpoints, the restart proof */ \
    X(optim_sgd_2x2, 90)                                                       \
    X(optim_sgd_momentum_2x2, 90)                                              \
    X(optim_nag_2x2, 90)                                                       \
    X(optim_adam_2x2, 90)                                                      \
    X(optim_adagrad_2x2, 90)                                                   \
    X(optim_rmsprop_2x2, 90)                                                   \
    X(optim_rmsprop_centered_2x2, 90)                                          \
    X(optim_off_2x2, 90)                                                       \
    X(optim_async_2x2, 90)                                                     \
    X(optim_errors_2x2, 120)                                                   \
    X(restart_sgd_momentum_2x2, 180)                                           \
    X(restart_adam_2x2, 240)                                                   \
    X(optim_adamw_2x2, 90)                                                     \
    X(optim_schedules_2x2, 90)                                                 \
    X(optim_lamb_2x2, 90)                                                      \
    X(optim_lamb_split_2x2, 90)                                                \
    X(optim_lamb_split_3x2, 90)                                                \
    X(optim_lamb_p3_2x2, 90)                                                   \
    X(optim_lamb_split_async_2x2, 90)                                          \
    X(restart_adamw_cosine_2x2, 180)                                           \
    X(restart_lamb_poly_2x2, 180)                                              \
    X(restart_lamb_split_2x2, 180)                                             \
    X(ckpt_crash_written_2x2, 120)                                             \
    X(ckpt_crash_commit_2x2, 120)                                              \
    X(ckpt_crash_committed_2x2, 120)                                           \
    X(ckpt_crash_cleaned_2x2, 120)                                             \
    X(ckpt_crash_auto_2x2, 120)                                                \
    /* test_server.c: the server's data path */                               \
    X(server_priority_order_2x1, 60)                                           \
    X(big_frames_socket_2x2, 300)                                              \
    X(big_frames_direct_2x2, 300)                                              \
    X(huge_hello_rss_secret_1x1, 60)                                           \
    X(reply_queue_bound_1x1, 60)                                               \
    X(direct_write_as_summed_2x1, 60)                                          \
    X(direct_write_pipeline_2x2, 120)                                          \
    X(direct_write_pushpull_2x2, 120)                                          \
    X(job_nice_2x1, 90)                                                        \
    X(job_nice_idle_2x1, 120)                                                  \
    X(job_nice_auto_2x1, 120)                                                  \
    X(job_nice_auto_busy_host_2x1, 300)                                        \
    X(offload_crowded_2x1, 120)                                                \
    X(offload_spare_2x1, 120)                                                  \
    X(server_memory_values_1x1, 120)                                           \
    X(server_fused_ref_1x1, 60)                                                \
    X(server_fused_frames_1x1, 60)                                             \
    X(server_refusal_names_request_1x1, 60)                                    \
    X(worker_unmatched_refusal_1x1, 60)                                        \
    X(many_keys_fused_ref_1x1, 120)                                            \
    X(many_keys_fused_ref_2x2, 150)                                            \
    X(p3_credit_fused_ref_2x2, 150)                                            \
    X(p3_credit_tiny_2x2, 150)                                                 \
    X(server_fused_ref_held_2x1, 60)                                           \
    X(cma_min_16k_1x1, 60)

#define IT_TEST(name) void it_test_##name(it_ctx *t)

#define IT_DECLARE_(name, secs) IT_TEST(name);
IT_TEST_LIST(IT_DECLARE_)
#undef IT_DECLARE_

#endif
