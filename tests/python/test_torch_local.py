"""kvsd.torch in one process (the local store): local_rank/local_size from
the environment, argument checks of DistributedOptimizer, and one worker's
training equal to plain PyTorch's."""
import pytest

import kvsd

torch = pytest.importorskip("torch")
import kvsd.torch as kvt  # noqa: E402
from kvsd import _lib  # noqa: E402

HAS_C_LOCAL = getattr(_lib.lib, "kvs_local_rank", None) is not None


@pytest.fixture
def kv():
    kvt.init("local")
    yield kvt.store()
    kvt.shutdown()


@pytest.mark.skipif(HAS_C_LOCAL, reason="libkvs has kvs_local_rank: the library decides")
@pytest.mark.parametrize("env,want", [
    ({}, (0, 1)),
    ({"KVS_LOCAL_RANK": "2", "KVS_LOCAL_SIZE": "4"}, (2, 4)),
    ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "3"}, (1, 3)),
    ({"KVS_LOCAL_RANK": "0", "KVS_LOCAL_SIZE": "2", "LOCAL_RANK": "5", "LOCAL_WORLD_SIZE": "8"},
     (0, 2)),
])
def test_local_rank_from_environment(kv, monkeypatch, env, want):
    for v in ("KVS_LOCAL_RANK", "KVS_LOCAL_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(v, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert (kvt.local_rank(), kvt.local_size()) == want


@pytest.mark.skipif(HAS_C_LOCAL, reason="libkvs has kvs_local_rank: the library decides")
@pytest.mark.parametrize("env,word", [
    ({"KVS_LOCAL_SIZE": "two"}, "KVS_LOCAL_SIZE='two'"),
    ({"KVS_LOCAL_SIZE": "0"}, "KVS_LOCAL_SIZE='0'"),
    ({"KVS_LOCAL_SIZE": "2", "KVS_LOCAL_RANK": "2"}, "KVS_LOCAL_RANK='2'"),
    ({"LOCAL_RANK": "-1"}, "LOCAL_RANK='-1'"),
])
def test_bad_local_variables_name_themselves(kv, monkeypatch, env, word):
    for v in ("KVS_LOCAL_RANK", "KVS_LOCAL_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(v, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(kvsd.ConfigError) as e:
        kvt.local_rank()
    assert word in str(e.value)


def test_not_initialised():
    with pytest.raises(ValueError, match="init"):
        kvt.rank()


def test_optimizer_arguments(kv):
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="backward_passes_per_step=0"):
        kvt.DistributedOptimizer(opt, m.named_parameters(), backward_passes_per_step=0)
    with pytest.raises(ValueError, match="op="):
        kvt.DistributedOptimizer(opt, m.named_parameters(), op="mean")
    with pytest.raises(ValueError, match="not in it"):
        kvt.DistributedOptimizer(opt, [("weight", m.weight)])
    with pytest.raises(ValueError, match="given twice"):
        kvt.DistributedOptimizer(opt, [("w", m.weight), ("w", m.bias)])
    with pytest.raises(kvsd.Error, match="'3bit'"):
        kvt.DistributedOptimizer(opt, m.named_parameters(), compression="3bit")
    with pytest.raises(kvsd.Error, match="dist_sync"):  # a local store compresses nothing
        kvt.DistributedOptimizer(opt, m.named_parameters(),
                                 compression={"type": "2bit", "threshold": 0.5})
    with pytest.raises(ValueError, match="SGD .* and AdamW; RMSprop is not among them"):
        kvt.DistributedOptimizer(torch.optim.RMSprop(m.parameters()), m.named_parameters(),
                                 server_update=True)
    c = torch.nn.Linear(2, 2).to(torch.complex64)
    with pytest.raises(TypeError, match="complex64"):
        kvt.DistributedOptimizer(torch.optim.SGD(c.parameters(), lr=0.1), c.named_parameters())


def test_one_worker_equals_plain_pytorch(kv):
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    b = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    b.load_state_dict(a.state_dict())
    oa = torch.optim.Adam(a.parameters(), lr=0.01)
    ob = kvt.DistributedOptimizer(torch.optim.Adam(b.parameters(), lr=0.01), b.named_parameters())
    assert isinstance(ob, torch.optim.Adam)
    g = torch.Generator().manual_seed(5)
    for _ in range(4):
        x = torch.randn(6, 4, generator=g, dtype=torch.float64)
        for m, o in ((a, oa), (b, ob)):
            o.zero_grad()
            (m(x) ** 2).mean().backward()
            o.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    # zero_grad between backward and step is refused
    (b(x) ** 2).mean().backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        ob.zero_grad()
    ob.step()
