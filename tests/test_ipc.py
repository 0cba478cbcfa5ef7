"""rltune._ipc: one framing, typed messages that round-trip, one error path for a closed peer and a raising one."""

from __future__ import annotations

import dataclasses
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from types import SimpleNamespace

import cloudpickle
import pytest

from rltune import _ipc, _tracking_messages
from rltune._ipc import (
    CLOUDPICKLE, Channel, ChannelClosed, CheckpointSaved, Closed, CloseTracking, Continue, Done, DrawPlots,
    EndTrial, EnvCheckFailed, Exploit, Failed, FinishStudy, LogCheckpoint, LogCurve, LogFiles, LogLine, LogModel, LogResult,
    LogSeedRuns, OpenTrial, PICKLE_OR_CLOUDPICKLE, Progress, Reconcile, Reconciled, RemoteError, Reply, Result, SeedGroup,
    Shutdown, Stop, TagTrial, TrackingInit,
    TrialInit, UpdateBest,
)
from rltune.orchestrator._child import spawn as spawn_trial_child
from rltune.trainers.sampling import _worker_messages
from rltune.trainers.sampling._worker_messages import (
    AddPolicy, Apply, ApplyEnvTaskFn, ForeachEnv, ForeachEnvWithContext, GetPolicySpaces, IsMultiAgent, NumEnvs, RemovePolicy,
    Sample, SetEnvTasks, SetPoliciesToTrain, SetPolicyMappingFn, SetPolicySet, SetTask, SetWeights,
)

MESSAGES = [
    # rollout workers
    Sample(), SetWeights({"default_policy": {"w": [1.0, 2.0]}}, {"timestep": 3}, {"default_policy": "stats"}),
    SetWeights({}), IsMultiAgent(), NumEnvs(), GetPolicySpaces(), SetPolicySet({"specs": {}, "policies_to_train": None}),
    AddPolicy("p1", "a spec", ("obs space", "act space"), {"w": [1.0]}, len, ["p1"]), RemovePolicy("p1", len, None),
    SetPolicyMappingFn(len), SetPoliciesToTrain(["p0"]), Apply(len, (1,), {"k": 2}), ForeachEnv(len),
    ForeachEnvWithContext(max), SetTask(3), SetEnvTasks({0: 2, 1: 3}), ApplyEnvTaskFn(max, {"episode_reward_mean": 1.0}),
    Shutdown(),
    Reply(None), Reply({"steps": 128}), RemoteError(ValueError("bad action"), "Traceback ...\nValueError: bad action"),
    # trial processes and the env check
    TrialInit("function", "orchestrator.trainables:counter", {"x": 2.0}, "/t/trial_00003", 3, 7,
              "/t/trial_00003/checkpoint_000002", 2, 1, 2, True, {"MyEnv-v0": "a creator"}),
    TrialInit("trainer", "PPO", {"env": "CartPole-v1"}, "/t/trial_00000"),
    TrialInit("function", "m:f", {"x": 1}, "/t/trial_00001", seed_group=SeedGroup((1, 2, 3), "race", "iqm", "score",
                                                                                "min", {"training_iteration": 5})),
    SeedGroup((7, 8)),
    Result({"training_iteration": 3, "score": 1.5, "info": {"x": [1, 2]}}), CheckpointSaved("/t/checkpoint_000003", 3),
    Done(), Failed("Traceback ...\nRuntimeError: boom"), Continue(), Continue(True), Stop("pruned", True),
    Exploit("/t/trial_00001/checkpoint_000004", {"lr": 0.0012, "env": "CartPole-v1"}), Stop("score = 5 >= 5", False),
    EnvCheckFailed("ConfigError", "config.env = 'X'", ["env: unknown"]),
    # the tracking process
    TrackingInit({"study_name": "s", "sys_path": ["/x"]}), OpenTrial(2, {"lr": 0.1}, {"lr": 0.1}, {"metric": "m"}),
    LogResult(2, {"training_iteration": 1}, 1_700_000_000_000, True),
    LogCheckpoint(2, "/staging/c", "checkpoint_000001"),
    LogFiles(2, "/staging/f", ["/staging/f/params.json"]), LogCurve(2), LogModel(2, "/staging/m"),
    TagTrial(2, {"rltune.pbt.exploited": "trial 1 at iteration 4"}),
    LogSeedRuns(2, [{"index": 0, "seed": 7, "results": [{"training_iteration": 1, "score": 1.0}]}], "COMPLETE"),
    EndTrial(2, "COMPLETE", "done", None), UpdateBest(2, 1.5, {"lr": 0.1}), Reconcile([], True),
    DrawPlots([], ["maximize"]), FinishStudy(False, 1_700_000_060_000), CloseTracking(False), LogLine(30, "a warning"),
    Progress(7), Reconciled([0, 2]), Closed(["x"], {"result": 1}),
]


def _pair(encoder=_ipc.PICKLE) -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    return Channel(Connection(a.detach()), encoder), Channel(Connection(b.detach()), encoder)


def _same(x: object, y: object) -> bool:
    if isinstance(x, RemoteError):  # exceptions compare by identity: compare what they carry
        return (type(x.exception), x.exception.args, x.traceback) == (type(y.exception), y.exception.args, y.traceback)
    return x == y


def test_every_message_class_is_listed_and_frozen():
    classes = {obj for module in (_ipc, _tracking_messages, _worker_messages) for obj in vars(module).values()
               if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__}
    assert classes - {_worker_messages.WorkerRequest} == {type(m) for m in MESSAGES}
    assert set(_worker_messages.REQUESTS) == {type(m) for m in MESSAGES if isinstance(m, _worker_messages.WorkerRequest)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        Stop("pruned", True).reason = "other"  # type: ignore[misc]


@pytest.mark.parametrize("encoder", [_ipc.PICKLE, CLOUDPICKLE], ids=["pickle", "cloudpickle"])
def test_every_message_round_trips(encoder):
    left, right = _pair(encoder)
    try:
        for message in MESSAGES:
            left.send(message)
            assert right.poll(5)
            received = right.receive()
            assert type(received) is type(message) and _same(received, message)
    finally:
        left.close()
        right.close()


def test_a_frame_is_one_pickle_behind_its_length():
    a, b = socket.socketpair()
    channel = Channel(Connection(a.detach()))
    try:
        channel.send(Stop("pruned", True))
        b.settimeout(5)
        (length,) = struct.unpack("!i", b.recv(4))
        body = b.recv(length, socket.MSG_WAITALL)
        assert len(body) == length and pickle.loads(body) == Stop("pruned", True)
    finally:
        channel.close()
        b.close()


def test_large_frames_pass_whole_while_the_peer_reads():
    left, right = _pair()
    big = Result({"hist": list(range(300_000))})  # far more than a socket buffer
    sender = threading.Thread(target=left.send, args=(big,))
    sender.start()
    try:
        assert right.receive() == big
    finally:
        sender.join(10)
        left.close()
        right.close()


def test_cloudpickle_carries_functions_that_plain_pickle_cannot():
    left, right = _pair(CLOUDPICKLE)
    offset = 3
    try:
        left.send(Apply(lambda worker, x: x + offset, (4,)))
        call = right.receive()
        assert call.fn(None, *call.args) == 7
        with pytest.raises((pickle.PicklingError, AttributeError)):
            _ipc.PICKLE(Apply(lambda w: w))
        # a worker's replies: plain pickle where it can (the fast path of the batches), else cloudpickle
        assert PICKLE_OR_CLOUDPICKLE(Reply({"steps": 128})) == _ipc.PICKLE(Reply({"steps": 128}))
        assert pickle.loads(PICKLE_OR_CLOUDPICKLE(Reply(lambda: offset))).value() == 3
    finally:
        left.close()
        right.close()


def test_a_closed_peer_is_channel_closed_on_receive_and_on_send():
    left, right = _pair()
    right.close()
    assert left.poll(5)  # the close is there to read: the next receive tells it
    with pytest.raises(ChannelClosed):
        left.receive()
    with pytest.raises(ChannelClosed):
        left.send(Continue())
    left.close()
    with pytest.raises(ChannelClosed):  # this end closed: the same error, not a ValueError of multiprocessing
        left.send(Continue())
    assert issubclass(ChannelClosed, ConnectionError)


def test_a_message_that_cannot_be_pickled_raises_before_anything_is_sent():
    left, right = _pair()
    try:
        with pytest.raises(Exception) as info:
            left.send(Result({"lock": threading.Lock()}))
        assert not isinstance(info.value, ChannelClosed)
        assert not right.poll(0.1)
        left.send(Done())
        assert right.receive() == Done()
    finally:
        left.close()
        right.close()


def test_a_child_that_dies_without_a_word_is_channel_closed():
    # ``os:_exit`` as the entry: the child exits at once with its fd number as status
    proc, channel = _ipc.spawn("os:_exit", stdin=subprocess.DEVNULL)
    try:
        _ipc.send_init(channel, b"payload")  # a child already gone: not an error here, seen when read
        assert channel.poll(30)
        with pytest.raises(ChannelClosed):
            channel.receive()
        assert proc.wait(30) > 2
    finally:
        channel.close()


def test_every_child_dies_with_its_parent_but_the_tracking_process():
    # the guard runs first in the child's command line, with this process's pid; this is the main thread
    proc, channel = _ipc.spawn("os:_exit", stdin=subprocess.DEVNULL)
    kept, kept_channel = _ipc.spawn("os:_exit", stdin=subprocess.DEVNULL, outlive_parent=True)
    try:
        assert proc.args[2].startswith(f"from rltune._parent_death import die_with_parent; "
                                       f"die_with_parent({os.getpid()}, True); from os import _exit")
        assert kept.args[2].startswith("from os import _exit")
        assert proc.wait(30) > 2 and kept.wait(30) > 2  # the guard let the child run: its parent is here
    finally:
        channel.close()
        kept_channel.close()


@pytest.mark.parametrize("by_main_thread", [True, False])
def test_a_child_whose_parent_died_before_it_ran_exits_at_once(by_main_thread):
    # the parent's pid in its command line is not its parent (any more): gone before the guard was armed
    code = f"from rltune._parent_death import die_with_parent; die_with_parent(-1, {by_main_thread}); print('ran')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""


def test_a_child_that_raises_reports_it_as_a_message_then_closes(tmp_path):
    # a trial process whose init does not unpickle: Failed(traceback), then its end of the channel closes
    with open(tmp_path / "out.log", "wb") as out:
        proc, channel = spawn_trial_child("rltune.orchestrator._trial_process:trial_entry", stdout=out,
                                          env=dict(os.environ))
    try:
        _ipc.send_init(channel, b"not a pickle")
        assert channel.poll(60)
        message = channel.receive()
        assert isinstance(message, Failed) and "could not be unpickled" in message.traceback
        with pytest.raises(ChannelClosed):
            channel.receive()
        assert proc.wait(30) == 1
    finally:
        channel.close()


def test_a_trial_process_takes_its_start_up_data_as_a_trial_init_only(tmp_path):
    """The init payload is a TrialInit (frozen, pickled with the trainable by value); a dict of it is refused."""
    init = TrialInit("function", lambda config: None, {"x": 1}, str(tmp_path), env_registrations={"E": lambda c: c})
    with pytest.raises(dataclasses.FrozenInstanceError):
        init.seed = 3  # type: ignore[misc]
    again = pickle.loads(cloudpickle.dumps(init))
    assert isinstance(again, TrialInit) and again.trial_dir == str(tmp_path) and again.env_registrations["E"](5) == 5
    with open(tmp_path / "out.log", "wb") as out:
        proc, channel = spawn_trial_child("rltune.orchestrator._trial_process:trial_entry", stdout=out,
                                          env=dict(os.environ))
    try:
        _ipc.send_init(channel, cloudpickle.dumps(dataclasses.asdict(TrialInit("function", "m:f", {}, str(tmp_path)))))
        assert channel.poll(60)
        message = channel.receive()
        assert isinstance(message, Failed) and message.traceback == (
            "the trial's init payload is a dict, not a rltune._ipc.TrialInit")
        assert proc.wait(30) == 1
    finally:
        channel.close()


def test_a_rollout_worker_that_raises_replies_remote_error():
    proc, channel = _ipc.spawn("rltune.trainers.sampling._remote:worker_entry", encoder=CLOUDPICKLE)
    try:
        # RolloutWorker(config=...) without its other arguments raises TypeError in the worker
        _ipc.send_init(channel, cloudpickle.dumps({"config": SimpleNamespace(log_level="WARN", torch_num_threads=None)}))
        assert channel.poll(60)
        reply = channel.receive()
        assert isinstance(reply, RemoteError) and isinstance(reply.exception, TypeError)
        assert "TypeError" in reply.traceback
        assert proc.wait(30) == 0
    finally:
        channel.close()


def test_an_exception_that_does_not_unpickle_travels_as_a_runtime_error():
    class Picky(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    message = _ipc.remote_error(Picky(1, 2), "tb")
    assert type(message.exception) is RuntimeError and "Picky: 1/2" in str(message.exception)
    plain = _ipc.remote_error(ValueError("v"), "tb")
    assert type(plain.exception) is ValueError


def test_calls_carry_functions_of_the_users_main_by_value():
    # plain pickle would name ``__main__.fn``, which the worker's ``__main__`` (rltune's -c stub) lacks
    main = sys.modules["__main__"]

    def fn(worker):
        return "ran"

    fn.__module__, fn.__qualname__ = "__main__", "_rltune_test_fn"
    main._rltune_test_fn = fn
    try:
        data = CLOUDPICKLE(Apply(fn))
    finally:
        del main._rltune_test_fn
    assert pickle.loads(data).fn(None) == "ran"


def test_the_trial_side_of_the_channel_reports_waits_and_stops(tmp_path):
    from rltune.orchestrator._reporter import Reporter, TrialStopped

    trial_end, host_end = _pair()
    reporter = Reporter(trial_end, trial_dir=tmp_path, checkpoint_freq=0)
    try:
        host_end.send(Continue())  # answered before it is asked: the reporter reads it after sending
        reporter(score=1.0, fn=lambda: 0)  # a value plain pickle cannot carry: the result's JSON form goes
        first = host_end.receive()
        assert isinstance(first, Result) and first.result["score"] == 1.0 and first.result["training_iteration"] == 1
        assert isinstance(first.result["fn"], (str, type(None)))
        host_end.send(Stop("pruned", True))
        with pytest.raises(TrialStopped) as info:
            reporter(score=2.0)
        assert (info.value.reason, info.value.checkpoint) == ("pruned", True)
        assert host_end.receive().result["score"] == 2.0
        with reporter.checkpoint_dir() as d:
            (tmp_path / d / "state").write_text("x")
        saved = host_end.receive()
        assert saved == CheckpointSaved(str(tmp_path / "checkpoint_000002"), 2)
        host_end.close()
        with pytest.raises(ChannelClosed):  # the orchestrator is gone
            reporter(score=3.0)
    finally:
        reporter.close()
        trial_end.close()
