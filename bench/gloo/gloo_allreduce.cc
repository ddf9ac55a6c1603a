// gloo_allreduce.cc - the reference for kvsd's socket path: a Gloo allreduce
// of SIZE_RANKS ranks (Debian's libgloo-dev, TCP transport over 127.0.0.1 or
// HOST) of BYTES of float32, timed with each of Gloo's algorithms; each
// algorithm's sum is checked on its own (bcube sums wrong for some rank
// counts, 3 for one: its row says WRONG, and the exit status is 1).
//   usage: gloo-allreduce RANK SIZE_RANKS STORE_DIR BYTES ITERS [HOST]
// HOST: the address this rank listens on (bench/colo-vs-gloo.sh: a veth's).
// Prints, from rank 0, one line per algorithm:
// "gloo <algo> <bytes> bytes  median_ms <ms>  ok|WRONG".
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

template <typename Algo>
static double run(const std::shared_ptr<gloo::Context> &ctx, std::vector<float> &v, int rank,
                  int size, int iters, bool *ok)
{
    std::vector<float *> ptrs{v.data()};
    Algo algo(ctx, ptrs, (int)v.size());
    std::vector<double> t;
    for (int it = -2; it < iters; it++) {
        for (size_t i = 0; i < v.size(); i++)
            v[i] = (float)((rank + 1) * (int)(i % 5 + 1));
        auto t0 = std::chrono::steady_clock::now();
        algo.run();
        auto t1 = std::chrono::steady_clock::now();
        if (it >= 0)
            t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    float w = (float)(size * (size + 1) / 2);
    for (size_t i = 0; i < v.size(); i++)
        if (v[i] != w * (float)(i % 5 + 1)) {
            *ok = false;
            break;
        }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        std::fprintf(stderr, "usage: gloo-allreduce RANK SIZE STORE_DIR BYTES ITERS [HOST]\n");
        return 2;
    }
    int rank = std::atoi(argv[1]), size = std::atoi(argv[2]), iters = std::atoi(argv[5]);
    size_t bytes = std::strtoull(argv[4], nullptr, 10);
    gloo::transport::tcp::attr attr;
    attr.hostname = argc == 7 ? argv[6] : "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(argv[3]);
    gloo::rendezvous::PrefixStore prefix("kvsd-bench", store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->connectFullMesh(prefix, dev);
    std::vector<float> v(bytes / sizeof(float));
    bool ok = true;
    struct {
        const char *name;
        double ms;
        bool ok;
    } r[4] = {{"ring", 0, true}, {"ring_chunked", 0, true}, {"halving_doubling", 0, true},
              {"bcube", 0, true}};
    r[0].ms = run<gloo::AllreduceRing<float>>(ctx, v, rank, size, iters, &r[0].ok);
    r[1].ms = run<gloo::AllreduceRingChunked<float>>(ctx, v, rank, size, iters, &r[1].ok);
    r[2].ms = run<gloo::AllreduceHalvingDoubling<float>>(ctx, v, rank, size, iters, &r[2].ok);
    r[3].ms = run<gloo::AllreduceBcube<float>>(ctx, v, rank, size, iters, &r[3].ok);
    for (auto &x : r)
        ok = ok && x.ok;
    /* neither rank leaves while the other may still read: a rank that exits
     * with unread bytes resets the connection and the other's last receive
     * fails ("Connection closed by peer") */
    gloo::BarrierAllToAll(ctx).run();
    if (rank == 0)
        for (auto &x : r)
            std::printf("gloo %-17s %zu bytes  median_ms %.3f  %s\n", x.name, bytes, x.ms,
                        x.ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
