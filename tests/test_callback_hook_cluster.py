"""CallbackHook(is_chief=...) in one process: a single worker, and two workers' sessions on one
in-process TF server (real shared variables, runs interleaved in a fixed order, so every epoch
boundary is deterministic). The cluster of processes is tests/test_cluster.py."""

from __future__ import annotations

import contextlib
import itertools
import warnings

import numpy as np
import pytest
import tensorflow as tf
from conftest import step_reads
from distributed.tf1_worker import NativeSharedStop, global_step

import hookbridge

keras = tf.keras
pytestmark = pytest.mark.filterwarnings("ignore:CallbackHook. batch_size= is not given")
_SCOPES = itertools.count()


class Recorder(keras.callbacks.Callback):
    """Records every training event, with the global step (``model.optimizer.iterations``) at
    each epoch's begin and end."""

    def __init__(self):
        super().__init__()
        self.events = []

    def _step(self):
        return int(self.model.optimizer.iterations)

    def on_train_begin(self, logs=None):
        self.events.append(("train_begin",))

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(("epoch_begin", epoch, self._step()))

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(("batch_end", batch, dict(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(("epoch_end", epoch, dict(logs), self._step()))

    def on_train_end(self, logs=None):
        self.events.append(("train_end", dict(logs or {})))

    def epochs(self):
        """(epoch, number of batches, logs) of each closed epoch."""
        out, batches = [], 0
        for e in self.events:
            if e[0] == "batch_end":
                batches += 1
            elif e[0] == "epoch_end":
                out.append((e[1], batches, e[2]))
                batches = 0
        return out


class StopAtEpochEnd(keras.callbacks.Callback):
    """Sets ``model.stop_training`` at the end of epoch ``epoch``."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            self.model.stop_training = True


def worker_graph(scope):
    """One worker's graph (variables under ``scope``, so tests sharing a server do not share
    state): the loss is fed; the train op adds ``inc`` (default 1) to the global step, after the
    global step's read (the one a fetch of it returns), so a fetched step is the step before."""
    g = tf.Graph()
    with g.as_default(), tf.name_scope(scope + "/"):
        gs = global_step()
        value = tf.compat.v1.placeholder(tf.float32, [], name="value")
        tf.identity(value, name="loss")
        inc = tf.compat.v1.placeholder_with_default(np.int64(1), [], name="inc")
        w = tf.compat.v1.Variable(tf.zeros([2]), name="w")
        with tf.control_dependencies(step_reads(gs)):
            train = tf.group(tf.compat.v1.assign_add(w, tf.ones([2])), gs.assign_add(inc))
    return g, {"gs": gs, "value": value, "inc": inc, "train": train, "loss": scope + "/loss"}


class Worker:
    """One worker's MonitoredTrainingSession on ``master`` (``""``: in-process)."""

    def __init__(self, stack, g, t, hooks, *, is_chief=True, master="", scaffold=None):
        self.g, self.t, self.runs, self.closed = g, t, [], False
        with g.as_default():
            self.sess = tf.compat.v1.train.MonitoredTrainingSession(
                master=master, is_chief=is_chief, hooks=hooks, scaffold=scaffold
            )
        stack.callback(self.close)  # a test that fails half-way leaves no session open

    def run(self, value, inc=1):
        with self.g.as_default():
            self.sess.run(self.t["train"], {self.t["value"]: value, self.t["inc"]: inc})
        self.runs.append(value)

    def close(self):
        if not self.closed:
            self.closed = True
            with self.g.as_default():
                self.sess.close()


def interleave(workers, values, rounds=50):
    """Runs the workers in turn (one run each per round) until every one stopped; worker i's
    r-th run feeds ``values(i, r)``."""
    for r in range(rounds):
        if all(w.sess.should_stop() for w in workers):
            break
        for i, w in enumerate(workers):
            if not w.sess.should_stop():
                w.run(values(i, r))
    for w in workers:
        w.close()


@pytest.fixture(scope="module")
def server():
    """One in-process TF server for the module (it cannot be shut down: it ends with the
    process); each test's variables live under a scope of their own."""
    return tf.distribute.Server.create_local_server()


def test_single_worker_chief_is_the_single_machine_hook():
    """One worker, is_chief=True: the same events and logs as without is_chief (one step per
    run: epochs from the global step are the epochs counted from runs)."""
    recs = {}
    for is_chief in (None, True):
        rec = recs[is_chief] = Recorder()
        g, t = worker_graph(f"s{next(_SCOPES)}")
        with contextlib.ExitStack() as stack:
            hook = hookbridge.CallbackHook(
                [rec], logs={"loss": t["loss"]}, steps_per_epoch=3, epochs=3, is_chief=is_chief
            )
            w = Worker(stack, g, t, [hook])
            interleave([w], lambda i, r: float(r * r))
        assert len(w.runs) == 9
    assert recs[True].events == recs[None].events
    assert recs[True].epochs() == [
        (0, 3, {"loss": pytest.approx(5 / 3)}),
        (1, 3, {"loss": pytest.approx((9 + 16 + 25) / 3)}),
        (2, 3, {"loss": pytest.approx((36 + 49 + 64) / 3)}),
    ]


def test_epochs_follow_the_global_step_when_it_jumps():
    """The global step advances by more than this worker's runs (another worker's steps, here
    fed as `inc`): epoch e covers global steps [3e, 3e + 3); a boundary crossed by a jump is
    seen at the run that fetched the step before it, or at the next run (the fetch reads the
    step before this run's increment)."""
    rec = Recorder()
    g, t = worker_graph(f"s{next(_SCOPES)}")
    incs = [1, 1, 1, 2, 2, 1, 1, 4, 1]
    with contextlib.ExitStack() as stack:
        hook = hookbridge.CallbackHook(
            [rec], logs={"loss": t["loss"]}, steps_per_epoch=3, is_chief=False
        )
        w = Worker(stack, g, t, [hook])
        for i, inc in enumerate(incs):
            w.run(float(i), inc)
        w.close()
    # global step before each run: 0 1 2 | 3 5 | 7 8 | 9 13 -> 14 after the last
    assert rec.epochs() == [
        (0, 3, {"loss": 1.0}),
        (1, 2, {"loss": 3.5}),  # closed at 7 (5 + 2): the next opens at 7 // 3 = 2
        (2, 2, {"loss": 5.5}),
        (3, 2, {"loss": 7.5}),  # step 9 -> 13 was seen at the next run, then epoch 14 // 3
    ]
    begins = [(e[1], e[2]) for e in rec.events if e[0] == "epoch_begin"]
    assert begins == [(0, 0), (1, 3), (2, 7), (3, 9)]  # the step when each epoch opened
    assert [e[3] for e in rec.events if e[0] == "epoch_end"] == [3, 7, 9, 14]
    assert rec.events[-1] == ("train_end", {"loss": 7.5})


def test_a_worker_joining_at_step_s_starts_at_epoch_s_over_spe_with_batch_0():
    recs = {}
    for is_chief in (None, False):
        rec = recs[is_chief] = Recorder()
        g, t = worker_graph(f"s{next(_SCOPES)}")
        with g.as_default():
            start = t["gs"].assign(7)
        scaffold = tf.compat.v1.train.Scaffold(init_fn=lambda _, sess, op=start: sess.run(op))
        with contextlib.ExitStack() as stack:
            hook = hookbridge.CallbackHook(
                [rec], logs={"loss": t["loss"]}, steps_per_epoch=3, epochs=4, is_chief=is_chief
            )
            # is_chief=True on the MonitoredTrainingSession: it runs the init_fn
            w = Worker(stack, g, t, [hook], scaffold=scaffold)
            interleave([w], lambda i, r: float(r))
        assert len(w.runs) == 5  # steps 7..11: epochs 2 and 3, then epochs=4 ends
    # both number epochs from the step; in a cluster batches count this worker's own runs
    assert [e[:2] for e in recs[None].events if e[0] in ("epoch_begin", "batch_end")] == [
        ("epoch_begin", 2), ("batch_end", 1), ("batch_end", 2),
        ("epoch_begin", 3), ("batch_end", 0), ("batch_end", 1), ("batch_end", 2),
    ]  # fmt: skip
    assert [e[:2] for e in recs[False].events if e[0] in ("epoch_begin", "batch_end")] == [
        ("epoch_begin", 2), ("batch_end", 0), ("batch_end", 1),
        ("epoch_begin", 3), ("batch_end", 0), ("batch_end", 1), ("batch_end", 2),
    ]  # fmt: skip
    assert recs[False].epochs() == recs[None].epochs()


def test_two_workers_share_epochs_and_the_chief_stop(server):
    """Chief and worker on one server, runs interleaved chief, worker, chief, ...: each closes
    its epoch when the shared step passed the end; the chief's callback stops at the end of
    epoch 1 and the worker stops at its next run. The native hand-written shared-variable stop
    (stopping the chief at the same step) ends both sessions at the same steps."""
    spe = 4
    outcome = {}
    for kind in ("bridged", "native"):
        scope = f"s{next(_SCOPES)}"
        recs = [Recorder(), Recorder()]
        with contextlib.ExitStack() as stack:
            workers = []
            for task in (0, 1):
                g, t = worker_graph(scope)
                if kind == "bridged":
                    cbs = [recs[task]] + ([StopAtEpochEnd(1)] if task == 0 else [])
                    hook = hookbridge.CallbackHook(
                        cbs, logs={"loss": t["loss"]}, steps_per_epoch=spe, is_chief=task == 0
                    )
                else:
                    hook = NativeSharedStop(task == 0, stop_at=9)
                workers.append(
                    Worker(stack, g, t, [hook], is_chief=task == 0, master=server.target)
                )
            interleave(workers, lambda i, r: float(10 * i + r))
            with workers[0].g.as_default(), tf.compat.v1.Session(server.target) as s:
                final = int(s.run(workers[0].t["gs"]))
        outcome[kind] = (len(workers[0].runs), len(workers[1].runs), final)
        if kind == "bridged":
            chief, other = recs
    # steps before each run: chief 0 2 4 6 8 | worker 1 3 5 7 9: the chief closes epoch 1 at
    # its run from 8 (8 + 1 >= 8, confirmed 9), stops and sets the shared stop; the worker's
    # run from 9 fetches it and stops there.
    assert outcome["bridged"] == outcome["native"] == (5, 5, 10)
    assert chief.epochs() == [
        (0, 3, {"loss": 1.0}),  # steps 0 2 4: its run from 4 began in epoch 0
        (1, 2, {"loss": 3.5}),  # steps 6 8
    ]
    assert other.epochs() == [
        (0, 2, {"loss": 10.5}),  # steps 1 3: it crossed the boundary itself (3 + 1 >= 4)
        (1, 2, {"loss": 12.5}),  # steps 5 7
        (2, 1, {"loss": 14.0}),  # step 9, then the chief's stop: the epoch closes at the end
    ]
    assert [e[:2] for e in other.events if e[0] == "epoch_begin"] == [
        ("epoch_begin", 0),
        ("epoch_begin", 1),
        ("epoch_begin", 2),
    ]
    assert other.events[-1] == ("train_end", {"loss": 14.0})
    assert chief.events[-1] == ("train_end", {"loss": 3.5})


def test_a_stop_on_a_non_chief_stops_that_worker_only(server):
    spe = 2
    scope = f"s{next(_SCOPES)}"
    recs = [Recorder(), Recorder()]
    with contextlib.ExitStack() as stack:
        workers = []
        for task in (0, 1):
            g, t = worker_graph(scope)
            cbs = [recs[task]] + ([StopAtEpochEnd(0)] if task == 1 else [])
            hook = hookbridge.CallbackHook(
                cbs, logs={"loss": t["loss"]}, steps_per_epoch=spe, epochs=4, is_chief=task == 0
            )
            workers.append(Worker(stack, g, t, [hook], is_chief=task == 0, master=server.target))
        interleave(workers, lambda i, r: float(r))
    assert len(workers[1].runs) == 1  # its epoch 0 closed at its first run (step 1 -> 2)
    assert [e[0] for e in recs[1].epochs()] == [0]
    assert [e[0] for e in recs[0].epochs()] == [0, 1, 2, 3]  # the chief trains to its end
    assert sum(b for _, b, _ in recs[0].epochs()) == len(workers[0].runs) == 7


def test_the_stop_variable_is_in_no_collection_and_old_checkpoints_restore(tmp_path):
    """The stop variable is not saved (no Saver sees it), and a checkpoint written without it
    restores under a CallbackHook(is_chief=True)."""
    ckpt = str(tmp_path / "ckpt")
    scope = f"s{next(_SCOPES)}"
    for hooks_of in (lambda t: [], lambda t: [_cluster_hook(t)]):
        g, t = worker_graph(scope)
        with g.as_default():
            hooks = hooks_of(t)
            with tf.compat.v1.train.MonitoredTrainingSession(
                is_chief=True, checkpoint_dir=ckpt, hooks=hooks, save_checkpoint_steps=2
            ) as sess:
                for _i in range(4):
                    sess.run(t["train"], {t["value"]: 1.0})
            names = {v.op.name for v in tf.compat.v1.global_variables()}
            names |= {v.op.name for v in tf.compat.v1.local_variables()}
        assert not any("hookbridge" in n for n in names)
    reader = tf.train.load_checkpoint(ckpt)
    assert reader.get_tensor(f"{scope}/global_step") == 8  # restored at 4, then 4 more
    assert not any("hookbridge" in key for key in reader.get_variable_to_shape_map())
    assert [e[0] for e in hooks[0].callbacks[0].epochs()] == [2, 3]


def _cluster_hook(t):
    return hookbridge.CallbackHook(
        [Recorder()], logs={"loss": t["loss"]}, steps_per_epoch=2, is_chief=True
    )


def test_chief_only_callbacks_default_explicit_and_none(tmp_path):
    """Non-chief: the file writers are left out by default (never given a model or params),
    exactly the listed ones with a list, none with []."""
    rec, csv_logger = Recorder(), keras.callbacks.CSVLogger(str(tmp_path / "log.csv"))
    progbar, tb = keras.callbacks.ProgbarLogger(), keras.callbacks.TensorBoard(str(tmp_path))
    ckpt = keras.callbacks.ModelCheckpoint(str(tmp_path / "w.weights.h5"), save_weights_only=True)
    history = keras.callbacks.History()
    cbs = [rec, csv_logger, progbar, tb, ckpt, history]

    def here(is_chief, chief_only=None):
        hook = hookbridge.CallbackHook(
            cbs, logs={}, steps_per_epoch=2, is_chief=is_chief, chief_only_callbacks=chief_only
        )
        return hook.active_callbacks

    assert here(True) == cbs
    assert here(False) == [rec, history]
    assert here(False, [rec]) == [csv_logger, progbar, tb, ckpt, history]
    assert here(False, []) == cbs
    assert here(True, [rec]) == cbs
    # what never runs on a non-chief is never given a model
    g, t = worker_graph(f"s{next(_SCOPES)}")
    fresh_csv = keras.callbacks.CSVLogger(str(tmp_path / "other.csv"))
    with contextlib.ExitStack() as stack:
        hook = hookbridge.CallbackHook(
            [Recorder(), fresh_csv], logs={"loss": t["loss"]}, steps_per_epoch=2, is_chief=False
        )
        w = Worker(stack, g, t, [hook])
        interleave([w], lambda i, r: 1.0, rounds=3)
    assert getattr(fresh_csv, "model", None) is None
    assert not (tmp_path / "other.csv").exists()


def test_bad_cluster_arguments_name_what_was_received():
    cb = Recorder()
    with pytest.raises(ValueError, match="chief_only_callbacks= was given without is_chief="):
        hookbridge.CallbackHook([cb], logs={}, steps_per_epoch=2, chief_only_callbacks=[])
    with pytest.raises(TypeError, match="is_chief must be True, False or None.*received 1"):
        hookbridge.CallbackHook([cb], logs={}, steps_per_epoch=2, is_chief=1)
    with pytest.raises(ValueError, match="pass steps_per_epoch="):
        hookbridge.CallbackHook([cb], logs={}, is_chief=True)
    with pytest.raises(ValueError, match="mode='evaluate' has no epochs or stop to share"):
        hookbridge.CallbackHook([cb], logs={}, mode="evaluate", is_chief=False)
    with pytest.raises(ValueError, match=r"chief_only_callbacks\[0\] = .* is not one of"):
        hookbridge.CallbackHook(
            [cb], logs={}, steps_per_epoch=2, is_chief=False, chief_only_callbacks=[Recorder()]
        )
    with pytest.raises(TypeError, match="chief_only_callbacks must be a list"):
        hookbridge.CallbackHook(
            [cb], logs={}, steps_per_epoch=2, is_chief=False, chief_only_callbacks=cb
        )
    g = tf.Graph()
    with g.as_default():
        tf.identity(tf.constant(1.0), name="loss")
        hook = hookbridge.CallbackHook(
            [cb], logs={"loss": "loss"}, steps_per_epoch=2, is_chief=True
        )
        with pytest.raises(ValueError, match="numbers epochs from the global step.*has none"):
            hook.begin()


def test_a_worker_joining_after_the_chief_stopped_keeps_the_stop(server):
    """The chief's stop is kept for a worker that starts later (it initializes the shared
    variable only if uninitialized): it stops after its first run; the chief's next training on
    the same servers resets it (a new training starts unstopped)."""
    scope = f"s{next(_SCOPES)}"
    recs = [Recorder(), Recorder()]
    with contextlib.ExitStack() as stack:
        g, t = worker_graph(scope)
        hook = hookbridge.CallbackHook(
            [recs[0], StopAtEpochEnd(0)], logs={"loss": t["loss"]}, steps_per_epoch=2, is_chief=True
        )
        chief = Worker(stack, g, t, [hook], master=server.target)
        interleave([chief], lambda i, r: 1.0)
        g, t = worker_graph(scope)
        hook = hookbridge.CallbackHook(
            [recs[1]], logs={"loss": t["loss"]}, steps_per_epoch=2, is_chief=False
        )
        late = Worker(stack, g, t, [hook], is_chief=False, master=server.target)
        interleave([late], lambda i, r: 1.0)
        g, t = worker_graph(scope)
        again = Recorder()
        hook = hookbridge.CallbackHook(
            [again], logs={"loss": t["loss"]}, steps_per_epoch=2, epochs=3, is_chief=True
        )
        chief_again = Worker(stack, g, t, [hook], master=server.target)
        interleave([chief_again], lambda i, r: 1.0)
    assert len(chief.runs) == 2 and len(late.runs) == 1
    assert [e[0] for e in recs[1].epochs()] == [1]  # joined at step 2: epoch 1, then stopped
    # a chief without a checkpoint initializes the variables again (the step restarts at 0),
    # and the stop is reset: it trains its 3 epochs
    assert len(chief_again.runs) == 6
    assert [e[0] for e in again.epochs()] == [0, 1, 2]


def test_a_worker_joining_after_the_last_epoch_trains_no_step():
    rec = Recorder()
    g, t = worker_graph(f"s{next(_SCOPES)}")
    with g.as_default():
        start = t["gs"].assign(6)
    scaffold = tf.compat.v1.train.Scaffold(init_fn=lambda _, sess: sess.run(start))
    with contextlib.ExitStack() as stack:
        hook = hookbridge.CallbackHook(
            [rec], logs={"loss": t["loss"]}, steps_per_epoch=3, epochs=2, is_chief=False
        )
        w = Worker(stack, g, t, [hook], scaffold=scaffold)
        assert w.sess.should_stop()
        w.close()
    assert rec.events == [("train_begin",), ("train_end", {})]


def test_estimator_with_is_chief_from_run_config(tmp_path):
    """Estimator.train: is_chief=run_config.is_chief (True without a cluster) gives the events
    and logs of the single-machine hook, over two train() calls continuing the global step."""
    tfe = pytest.importorskip(
        "tensorflow_estimator", reason="Estimator: tensorflow-estimator exists on TF 2.15 only"
    )
    del tfe

    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [1, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels), name="loss")
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()
        )
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        x = tf.constant([[1.0], [2.0], [3.0], [4.0]])
        return tf.data.Dataset.from_tensor_slices((x, 2 * x)).repeat().batch(2)

    recs = {}
    for kind in ("plain", "cluster"):
        config = tf.estimator.RunConfig(tf_random_seed=0)
        est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / kind), config=config)
        rec = recs[kind] = Recorder()
        is_chief = est.config.is_chief if kind == "cluster" else None
        for steps in (4, 5):
            hook = hookbridge.CallbackHook(
                [rec], logs={"loss": "loss"}, steps_per_epoch=3, batch_size=2, is_chief=is_chief
            )
            est.train(input_fn, steps=steps, hooks=[hook])

    def without_batch_index(events):
        return [(e[0], *e[2:]) if e[0] == "batch_end" else e for e in events]

    plain, cluster = recs["plain"].events, recs["cluster"].events
    assert without_batch_index(cluster) == without_batch_index(plain)
    assert [e[0] for e in recs["cluster"].epochs()] == [0, 1, 1, 2]  # 4 steps, then 5 more
    # the batch index counts this worker's runs: the continuation (at step 4, mid-epoch 1)
    # starts at batch 0 in a cluster, at 1 (4 % 3) on a single machine
    first = [i for i, e in enumerate(plain) if e[0] == "train_begin"][1] + 2
    assert (plain[first][:2], cluster[first][:2]) == (("batch_end", 1), ("batch_end", 0))


class PreemptedWhileOthersTrain(tf.compat.v1.train.SessionRunHook):
    """Before the CallbackHook in the hook list: the ``at``-th run's ``after_run`` raises
    AbortedError (MonitoredSession recreates the session and retries the run; the hooks after
    this one see no ``after_run`` for the failed run), and the new session starts at shared step
    ``resume_at``, as if the other workers had trained on while this one waited."""

    def __init__(self, gs, at, resume_at):
        self.at, self.runs, self.sessions = at, 0, 0
        with tf.compat.v1.get_default_graph().as_default():
            self.assign = gs.assign(resume_at)

    def after_create_session(self, session, coord):
        self.sessions += 1
        if self.sessions == 2:
            session.run(self.assign)

    def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs == self.at:
            raise tf.errors.AbortedError(None, None, "simulated preemption")


@pytest.mark.parametrize(
    "at, expected",
    [
        # The failed run was the 2nd of epoch 1: epoch 1 is closed with its one run before the
        # retried run, which counts in epoch 7 // 3 = 2.
        (5, [(0, 3, 1.0), (1, 1, 3.0), (2, 2, 4.5), (3, 3, 7.0)]),
        # The failed run was the first of epoch 1 (begun for it): no run counts in epoch 1, so it
        # gets no on_epoch_end (CallbackHook warns); the retried run opens epoch 2.
        (4, [(0, 3, 1.0), (2, 2, 3.5), (3, 3, 6.0)]),
    ],
)
def test_a_recovered_session_past_the_open_epoch_closes_or_drops_it(at, expected):
    """A session recovered after the shared step passed the end of the open epoch (the other
    workers trained on while this one waited): the epoch is closed before the next run, with
    the runs this worker made in it, or dropped if it had none; the next epoch is numbered from
    the shared step. Deterministic form of tests/test_cluster_preemption.py's scenario."""
    rec = Recorder()
    g, t = worker_graph(f"s{next(_SCOPES)}")
    with g.as_default():
        preempt = PreemptedWhileOthersTrain(t["gs"], at, resume_at=7)
    with contextlib.ExitStack() as stack:
        hook = hookbridge.CallbackHook(
            [rec], logs={"loss": t["loss"]}, steps_per_epoch=3, epochs=4, is_chief=False
        )
        w = Worker(stack, g, t, [preempt, hook])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            interleave([w], lambda i, r: float(r))
    dropped = [str(c.message) for c in caught if "no run of this worker counts" in str(c.message)]
    assert [(e, n, logs["loss"]) for e, n, logs in rec.epochs()] == expected
    begun = [e[1] for e in rec.events if e[0] == "epoch_begin"]
    assert begun == [0, 1, 2, 3]
    assert len(dropped) == (at == 4), dropped
    if dropped:
        assert "epoch 1 was begun" in dropped[0] and "the next epoch is 2" in dropped[0]


class SharedStepAtRecovery(tf.compat.v1.train.SessionRunHook):
    """Before the CallbackHook: the second session (the recovered one) starts at shared step
    ``resume_at`` (the in-process session lost the variables, as a restarted ps: the step of
    the checkpoint the chief restored, or of the other workers that trained on)."""

    def __init__(self, gs, resume_at):
        self.sessions = 0
        self.assign = gs.assign(resume_at)

    def after_create_session(self, session, coord):
        self.sessions += 1
        if self.sessions == 2:
            session.run(self.assign)


class LosesThePsIn(keras.callbacks.Callback):
    """Its first ``event`` call (for epoch ``epoch``: ``on_epoch_*``) reads the model on the
    parameter server just lost: ``model.optimizer.iterations`` raises UnavailableError, as it
    does natively there (Keras 2's TensorBoard reads it at each epoch end, for
    ``epoch_learning_rate``). MonitoredSession recovers (a new session, the run retried). Its
    other calls read the model too, and every call is kept in ``calls``."""

    def __init__(self, event, epoch=None):
        super().__init__()
        self.calls = []
        self.lost = (event,) if epoch is None else (event, epoch)
        setattr(self, event, lambda *args: self._call(event, *args))

    def _call(self, event, *args):
        call = (event, *args[:-1])  # without the logs
        self.calls.append(call)
        if call == self.lost and self.calls.count(call) == 1:
            raise tf.errors.UnavailableError(None, None, "the ps is lost (simulated)")
        int(self.model.optimizer.iterations)


@pytest.mark.parametrize(
    "event, epoch, resume_at, expected",
    [
        # on_epoch_end(1) interrupted after the first recorder; the restored step (4) is before
        # the end of epoch 1: epoch 1 stays closed, the replayed steps count in epoch 2 (until
        # the step passes 9). The old hook closed epoch 1 again at step 6.
        ("on_epoch_end", 1, 4, [(0, 3, 1.0), (1, 3, 4.0), (2, 5, 7.0), (3, 3, 11.0)]),
        # ... the step went on past the end of epoch 1 (7): epoch 2 takes the retried run and
        # the next. The old hook closed epoch 1 again at once, in the recovered session.
        ("on_epoch_end", 1, 7, [(0, 3, 1.0), (1, 3, 4.0), (2, 2, 5.5), (3, 3, 8.0)]),
        # on_epoch_begin(2) interrupted (in before_run: the run did not happen): the callbacks
        # after it get it in the recovered session; epoch 2 is not begun again.
        ("on_epoch_begin", 2, 6, [(0, 3, 1.0), (1, 3, 4.0), (2, 3, 7.0), (3, 3, 10.0)]),
        # on_train_begin interrupted in the first session's creation (MonitoredSession creates
        # it again): training begins once, for every callback.
        ("on_train_begin", None, 0, [(0, 3, 1.0), (1, 3, 4.0), (2, 3, 7.0), (3, 3, 10.0)]),
    ],
)
def test_a_session_error_inside_a_callback_never_repeats_nor_loses_an_event(
    event, epoch, resume_at, expected
):
    """A callback's read of the model fails on a lost ps while the hook delivers an event: the
    error propagates (MonitoredSession recovers it: a new session, the run retried), and the
    event is finished in the new session for the callbacks it had not reached; it is never
    started again. Every callback sees each epoch begun once and closed once, in order, and
    training begun once: the guarantee test_cluster_preemption.py's scenario broke under load
    (on_epoch_end epochs [..., 7, 8, 8, 9, ...] when the ps died during the chief's TensorBoard
    on_epoch_end)."""
    before, after = Recorder(), Recorder()
    breaker = LosesThePsIn(event, epoch)
    g, t = worker_graph(f"s{next(_SCOPES)}")
    with g.as_default():
        at_recovery = SharedStepAtRecovery(t["gs"], resume_at)
    with contextlib.ExitStack() as stack:
        hook = hookbridge.CallbackHook(
            [before, breaker, after],
            logs={"loss": t["loss"]},
            steps_per_epoch=3,
            epochs=4,
            is_chief=False,
        )
        w = Worker(stack, g, t, [at_recovery, hook])
        interleave([w], lambda i, r: float(r))
    assert at_recovery.sessions == 2  # one recovery
    for rec in (before, after):
        kinds = [e[0] for e in rec.events]
        assert kinds.count("train_begin") == 1 and kinds[-1] == "train_end"
        assert [e[1] for e in rec.events if e[0] == "epoch_begin"] == [0, 1, 2, 3]
        assert [(e, n, logs["loss"]) for e, n, logs in rec.epochs()] == expected
    # the callback the error interrupted is called again (its call was cut short), once more
    assert breaker.calls.count(breaker.lost) == 2


class ReadsAtEnd(tf.compat.v1.train.SessionRunHook):
    """After the CallbackHook: the ``after_run`` of its ``at``-th run raises AbortedError (the
    ps restarted just after the run: MonitoredSession recreates the session, the variables are
    lost, the run is retried), and ``end`` reads ``variable()`` in the last session."""

    def __init__(self, at, variable):
        self.at, self.runs, self.variable, self.value = at, 0, variable, None

    def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs == self.at:
            raise tf.errors.AbortedError(None, None, "the ps restarted (simulated)")

    def end(self, session):
        self.value = bool(session.run(self.variable()))


def test_a_stop_the_chief_published_before_a_ps_restart_is_published_again():
    """The chief's callback stops training at the end of epoch 0 and the hook publishes the
    stop (the shared variable) in that run's ``after_run``; then the ps restarts and the new one
    lost the variable (it is initialized to False again). The chief publishes it again, in the
    retried run, so the other workers still stop."""
    g, t = worker_graph(f"s{next(_SCOPES)}")
    with contextlib.ExitStack() as stack:
        hook = hookbridge.CallbackHook(
            [StopAtEpochEnd(0)], logs={"loss": t["loss"]}, steps_per_epoch=2, is_chief=True
        )
        reader = ReadsAtEnd(2, lambda: hook._shared.stop_variable)  # built in begin()
        w = Worker(stack, g, t, [hook, reader])
        interleave([w], lambda i, r: float(r))
    assert reader.runs == 3  # runs 1, 2 (the stop, then the error), 2 retried
    assert reader.value is True
