"""kvsd.torch.elastic: training that goes on when workers leave and join
(KVS_ELASTIC=1), in Horovod's shape.

    import kvsd.torch as kt

    kt.init()
    opt = kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                  named_parameters=model.named_parameters())
    state = kt.elastic.State(model, opt, epoch=0, batch=0)

    @kt.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                ...                      # forward, backward, opt.step()
                state.commit()           # every step or every few steps
            state.batch = 0

    train(state)

When a worker leaves or joins, an operation raises kvsd.MembershipChanged
on every member; run() catches it, restores the state of the last commit(),
makes rank 0's state everyone's (sync(): rank 0 is always a worker that was
a member before the change, so a joiner gets the survivors' state) and calls
the function again, which goes on from the restored epoch and batch.  The
first call syncs too, so a worker that joins a running job starts from the
others' state.  Gradients are averaged over the members of each step
(kvsd.torch.size() changes with them).  docs/guide/pytorch.md, "Elastic
training".
"""
import copy
import functools

import torch

from . import _errors
from . import torch as _kt

MembershipChanged = _errors.by_name["KVS_EMEMBERSHIP"]


def _clone(obj):
    """A deep copy whose tensors are copies (on their device)."""
    if torch.is_tensor(obj):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(v) for v in obj)
    return copy.deepcopy(obj)


class State:
    """A model, its optimizer and named values (epoch=0, batch=0, ...;
    numbers, strings, lists, dicts: anything JSON carries), reachable as
    attributes.  commit() keeps a copy of all of them, restore() puts the
    copy back, sync() makes rank 0's everyone's (collective)."""

    def __init__(self, model, optimizer, **kwargs):
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "_values", dict(kwargs))
        object.__setattr__(self, "_saved", None)
        object.__setattr__(self, "commits", 0)
        self.commit()

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError("kvsd.torch.elastic.State has no value %r" % name)

    def __setattr__(self, name, value):
        if name in ("model", "optimizer", "commits"):
            object.__setattr__(self, name, value)
        else:
            self._values[name] = value

    def commit(self):
        """Keep the current model, optimizer and values: what restore()
        goes back to after a membership change."""
        saved = (_clone(self.model.state_dict()), _clone(self.optimizer.state_dict()),
                 copy.deepcopy(self._values))
        object.__setattr__(self, "_saved", saved)
        object.__setattr__(self, "commits", self.commits + 1)

    def restore(self):
        """Put back what the last commit() kept; forget the pushes of the
        step that failed."""
        model, opt, values = self._saved
        self.model.load_state_dict(_clone(model))
        self.optimizer.load_state_dict(_clone(opt))
        self._values.clear()
        self._values.update(copy.deepcopy(values))
        reset = getattr(self.optimizer, "_reset_step", None)
        if reset is not None:
            reset()

    def sync(self):
        """Make rank 0's model, optimizer state and values everyone's, and
        commit them.  Collective: every member calls it (run() does)."""
        kv = _kt.store()
        try:  # operations of an earlier membership: their errors are old news
            kv.wait_all()
        except _errors.Error:
            pass
        reset = getattr(self.optimizer, "_reset_step", None)
        if reset is not None:
            reset()
        _kt.broadcast_parameters(self.model.state_dict(), 0)
        _kt.broadcast_optimizer_state(self.optimizer, 0)
        values = _kt.broadcast_object(self._values, 0)
        self._values.clear()
        self._values.update(values)
        self.commit()


def run(func):
    """Decorate func(state, ...): call it after state.sync(); when it raises
    kvsd.MembershipChanged (workers left or joined), restore state's last
    commit, sync again from rank 0 and call it again.  Returns what func
    returns.  Any other error (kvsd.PeerDead below KVS_MIN_WORKERS, ...)
    passes through."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        changes = 0
        while True:
            try:
                state.sync()
                return func(state, *args, **kwargs)
            except MembershipChanged:
                changes += 1
                state.restore()
            finally:
                wrapper.membership_changes = changes

    wrapper.membership_changes = 0
    return wrapper
