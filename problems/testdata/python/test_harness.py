"""Unit tests of the harness's Python side (run by TestHarness_PythonUnitTests)."""

import os
import tempfile
import unittest

import torch

import eval as harness
import judge
import kbutils
import worker


class CombineTest(unittest.TestCase):
    def test_secret_changes_seed_and_is_deterministic(self):
        self.assertNotEqual(harness.combine(42, 1), harness.combine(42, 2))
        self.assertEqual(harness.combine(42, 7), harness.combine(42, 7))
        self.assertNotEqual(harness.combine(1, 2), harness.combine(2, 1))
        self.assertLess(harness.combine(2**62, 2**62), 2**63)


class CasesTest(unittest.TestCase):
    def test_read_cases(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("size: 127; seed: -3; flag: true; name: bf16; scale: 0.5\n\nsize: 1; seed: 2\n")
        try:
            cases = harness.read_cases(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(cases, [{"size": 127, "seed": -3, "flag": True, "name": "bf16", "scale": 0.5}, {"size": 1, "seed": 2}])

    def test_bad_case(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("size 127\n")
        try:
            with self.assertRaises(ValueError):
                harness.read_cases(f.name)
        finally:
            os.unlink(f.name)


class StatsTest(unittest.TestCase):
    def test_stats(self):
        s = harness.stats([1.0, 2.0, 3.0, 4.0])
        self.assertEqual(s["runs"], 4)
        self.assertAlmostEqual(s["mean"], 2.5)
        self.assertAlmostEqual(s["std"], 1.2909944487)
        self.assertAlmostEqual(s["err"], 1.2909944487 / 2)
        self.assertEqual((s["best"], s["worst"]), (1.0, 4.0))


class PlainOutputTest(unittest.TestCase):
    def test_plain_outputs_pass(self):
        e = torch.zeros(2, 3)
        self.assertEqual(harness.plain_output(kbutils, torch, e, torch.ones(2, 3)), "")
        self.assertEqual(harness.plain_output(kbutils, torch, (e, e), [torch.ones(2, 3), torch.ones(2, 3)]), "")
        self.assertEqual(harness.plain_output(kbutils, torch, None, torch.ones(1)), "")  # a KernelBot checker: no answer known

    def test_refusals(self):
        e = torch.zeros(2, 3)

        class Sub(torch.Tensor):
            pass

        for out, want in [
            (torch.ones(2, 3).as_subclass(Sub), "subclass"),
            (torch.ones(2, 3, dtype=torch.float64), "torch.float64"),
            (torch.ones(3, 2), "shape (3, 2)"),
            (torch.empty(2, 3, device="meta"), "meta"),
            ([1, 2], "a list"),
        ]:
            self.assertIn(want, harness.plain_output(kbutils, torch, e, out))
        self.assertIn("1 items", harness.plain_output(kbutils, torch, (e, e), (e,)))
        self.assertIn("output[1]", harness.plain_output(kbutils, torch, None, (e, torch.ones(1).as_subclass(Sub))))


class OutputLayoutTest(unittest.TestCase):
    def test_outputs_freed_without_the_cycle_collector(self):
        # A call's output must go as soon as the worker drops it: a
        # reference cycle around it kept a GiB a call alive on the GPU
        # until the cyclic collector ran (docs/history/gpu-runs.md, 2026-12-06).
        import gc
        import weakref

        w = worker.Worker.__new__(worker.Worker)
        w.torch = torch
        gc.disable()
        try:
            out = (torch.ones(4), [torch.zeros(2)])
            refs = [weakref.ref(out[0]), weakref.ref(out[1][0])]
            tree, tensors = w.outputs(out)
            self.assertEqual(tree, {"tuple": [{"t": 0}, {"list": [{"t": 1}]}]})
            self.assertEqual(len(tensors), 2)
            del out, tree, tensors
            self.assertEqual([r() for r in refs], [None, None])
        finally:
            gc.enable()
        with self.assertRaises(worker.Refused):
            w.outputs((torch.ones(1), "no"))


class AllcloseTest(unittest.TestCase):
    def test_match(self):
        e = torch.tensor([1.0, float("nan"), float("inf")])
        self.assertEqual(kbutils.verbose_allclose(e.clone(), e), [])

    def test_tolerance_and_first_mismatches(self):
        e = torch.zeros(10)
        r = e.clone()
        r[3] = 1.0
        r[7] = -2.0
        reasons = kbutils.verbose_allclose(r, e, rtol=0, atol=0.5)
        self.assertIn("2 of 10 elements differ", reasons[0])
        self.assertIn("at (3,): got 1, expected 0", reasons[1])
        self.assertIn("at (7,): got -2, expected 0", reasons[2])

    def test_nan_where_finite_expected(self):
        r = torch.tensor([float("nan")])
        self.assertIn("1 of 1", kbutils.verbose_allclose(r, torch.tensor([0.0]), rtol=1, atol=1)[0])

    def test_inf_sign(self):
        r = torch.tensor([float("-inf")])
        self.assertTrue(kbutils.verbose_allclose(r, torch.tensor([float("inf")])))

    def test_shape_dtype(self):
        self.assertIn("shape mismatch", kbutils.verbose_allclose(torch.zeros(2, 3), torch.zeros(3, 2))[0])
        self.assertIn("dtype mismatch", kbutils.verbose_allclose(torch.zeros(2), torch.zeros(2, dtype=torch.float64))[0])
        self.assertIn("expected a torch.Tensor", kbutils.verbose_allclose([1, 2], torch.zeros(2))[0])

    def test_exact_for_integers(self):
        self.assertTrue(kbutils.verbose_allclose(torch.tensor([1, 2]), torch.tensor([1, 3]), rtol=1, atol=1))


class DataTest(unittest.TestCase):
    def test_clone_is_deep(self):
        data = (torch.zeros(3), [torch.ones(2)], {"k": torch.ones(1)}, 5)
        c = kbutils.clone_data(data)
        c[0].add_(1)
        c[1][0].add_(1)
        self.assertTrue(kbutils.same_data(data, (torch.zeros(3), [torch.ones(2)], {"k": torch.ones(1)}, 5)))
        self.assertFalse(kbutils.same_data(data, c))

    def test_same_data_nan(self):
        x = torch.tensor([float("nan"), 1.0])
        self.assertTrue(kbutils.same_data(x, x.clone()))

    def test_deterministic_restores(self):
        before = torch.are_deterministic_algorithms_enabled()
        with kbutils.deterministic():
            self.assertTrue(torch.are_deterministic_algorithms_enabled())
        self.assertEqual(torch.are_deterministic_algorithms_enabled(), before)

    def test_generator_is_seeded(self):
        a = torch.randn(4, generator=kbutils.generator(5, "cpu"))
        b = torch.randn(4, generator=kbutils.generator(5, "cpu"))
        self.assertTrue(torch.equal(a, b))


class WindowTest(unittest.TestCase):
    """How the CUDA judge puts several calls in one window (Judge.batch_size,
    Judge.fused, enough); the windows themselves need a GPU."""

    def judge_with(self, size):
        class Link:
            def lay_out(self, datas):
                return [], [], size * len(datas)

        j = object.__new__(judge.Judge)
        j.link = Link()
        return j

    def test_batch_size(self):
        self.addCleanup(judge.KNOBS.update, dict(judge.KNOBS))
        judge.KNOBS["batch"] = None
        small = self.judge_with(1 << 20)
        self.assertEqual(small.batch_size([30_000.0] * 10, None), judge.MAX_BATCH)  # 34 would reach the window
        self.assertEqual(small.batch_size([200_000.0] * 10, None), 5)
        self.assertEqual(small.batch_size([2_000_000.0] * 10, None), 1)  # long calls stay alone
        self.assertEqual(self.judge_with(64 << 20).batch_size([30_000.0] * 10, None), judge.BATCH_BYTES // (64 << 20))
        self.assertEqual(self.judge_with(2 << 30).batch_size([30_000.0] * 10, None), 1)
        judge.KNOBS["batch"] = 1
        self.assertEqual(small.batch_size([30_000.0] * 10, None), 1)

    def test_knobs_are_read_once(self):
        knobs = judge.read_knobs({"KERNELBOX_BENCH_MAX_REPEATS": "7", "KERNELBOX_JUDGE_SELFTIME": "1", "KERNELBOX_BENCH_WALL_S": ""})
        self.assertEqual((knobs["repeats"], knobs["wall"], knobs["selftime"], knobs["ncu"]), (7, None, True, False))

    def test_fused_keeps_honest_windows(self):
        j = self.judge_with(1)
        out = j.fused([30_000.0] * 9 + [90_000.0], [28_500.0, 28_700.0, 28_600.0], 8)
        self.assertEqual(out["times"], [28_500.0, 28_700.0, 28_600.0])
        self.assertEqual((out["batch"], out["alone_median"]), (8, 30_000.0))
        self.assertNotIn("batch_refused", out)

    def test_fused_refuses_work_ahead(self):
        # A kernel that does the next call's work in this one: the window's
        # calls look 3x quicker than one alone, and only the calls alone count.
        j = self.judge_with(1)
        out = j.fused([30_000.0] * 10, [10_000.0] * 5, 8)
        self.assertNotIn("times", out)
        self.assertIn("the calls alone count", out["batch_refused"])

    def test_enough_counts_every_call_of_a_window(self):
        import time

        noisy = [1e6, 1.5e6, 0.5e6]
        self.assertFalse(judge.enough(noisy, 0.005, 60, time.perf_counter()))
        self.assertTrue(judge.enough(noisy, 0.005, 60, time.perf_counter(), calls=2))
        self.assertFalse(judge.enough(noisy, 0.005, 60, time.perf_counter(), calls=2, least=4))
        steady = [1e6] * 3  # no spread: only the least count holds it back
        self.assertTrue(judge.enough(steady, 10, 60, time.perf_counter()))
        self.assertFalse(judge.enough(steady, 10, 60, time.perf_counter(), least=judge.MIN_WINDOWS))


class TimingTrustTest(unittest.TestCase):
    """What the judge does with times it cannot fully trust
    (Judge.check_timing, Judge.recheck_clock); the CUDA clock that
    produces them needs a GPU (make test/gpu)."""

    def judge_with(self, before=300_000.0, after=None, why=""):
        class Link:
            def offset(self):
                return before, 31

            def recheck(self):
                return after, why

        j = object.__new__(judge.Judge)
        j.link, j.flags, j.timed_any = Link(), [], True
        return j

    def test_honest_times_pass_unflagged(self):
        j = self.judge_with()
        j.check_timing({"n": 1}, {"times": [40_000.0, 41_000.0], "late": 1, "calls": 40})
        self.assertEqual(j.flags, [])

    def test_net_at_or_below_zero_is_flagged_not_clamped(self):
        j = self.judge_with()
        reply = {"times": [-2_000.0, 5_000.0, 6_000.0], "late": 0, "calls": 3}
        j.check_timing({"n": 1}, reply)
        self.assertEqual(reply["times"][0], -2_000.0)
        self.assertEqual([r for r, _ in j.flags], ["NET_NONPOSITIVE"])

    def test_mean_at_or_below_zero_is_the_box_failure(self):
        j = self.judge_with()
        with self.assertRaises(judge.WorkerDied) as e:
            j.check_timing({"n": 1}, {"times": [-2_000.0, 1_000.0], "late": 0, "calls": 2})
        self.assertTrue(e.exception.setup)
        self.assertIn("timing unstable on this GPU", str(e.exception))

    def test_late_replies_are_neither_flagged_nor_failed(self):
        # A late call's time holds the wait: lateness only costs the
        # submission, and one that syncs in custom_kernel is always late.
        j = self.judge_with()
        j.check_timing({"n": 1}, {"times": [40_000.0], "late": 40, "calls": 40})
        self.assertEqual(j.flags, [])

    def test_malformed_layout_is_a_protocol_error(self):
        import wire

        for tree in ({"t": 5}, {"t": "x"}, {"tuple": 3}, {"dict": [[1]]}, {"list": [{"t": 0}, {"q": 1}]}):
            with self.assertRaises(ValueError, msg=tree):
                wire.unflatten(tree, [torch.zeros(1)])

    def test_clock_drift(self):
        for after, flagged in ((305_000.0, False), (280_000.0, False), (345_000.0, True), (None, True)):
            j = self.judge_with(after=after, why="the null worker failed")
            j.recheck_clock()
            self.assertEqual([r for r, _ in j.flags], ["CLOCK_DRIFT"] if flagged else [], after)
        j = self.judge_with(after=400_000.0)
        j.timed_any = False  # nothing was netted with the offset
        j.recheck_clock()
        self.assertEqual(j.flags, [])


class ProfileOpTest(unittest.TestCase):
    """Profile mode on the CPU: the judge's link hands the input over as a
    call's, the worker's op profile runs the call under torch.profiler (or,
    under ncu, only inside the NVTX range) and sends its output back, and
    the judge's verdict decides whether the report is shown."""

    def setUp(self):
        import threading
        import types

        import wire

        mine, theirs = wire.Channel.pair()
        self.addCleanup(mine.close)
        self.addCleanup(theirs.close)
        self.calls = 0

        def add(data):
            self.calls += 1
            a, b = data
            return a + b

        w = self.worker = worker.Worker(theirs)
        w.kernel = add
        serving = threading.Thread(target=w.serve, daemon=True)
        serving.start()
        self.addCleanup(serving.join, 10)
        self.addCleanup(mine.send, {"op": "stop"})

        class Side:
            """The judge's end, as CpuLink uses it (judge.Judge.send/recv)."""

            def __init__(self):
                self.torch, self.fds = torch, []

            def send(self, obj, fds=()):
                mine.send(obj, fds)

            def recv(self, want_fds=False):
                msg, fds = mine.recv()
                if not want_fds:
                    for fd in fds:
                        os.close(fd)
                    fds = []
                self.fds = fds
                return msg

        def check(data, output):
            a, b = data
            return kbutils.verbose_allclose(output, a + b)

        self.j = object.__new__(judge.Judge)
        self.j.torch, self.j.kb = torch, kbutils
        self.j.ref = types.SimpleNamespace(check_implementation=check)
        self.j.link = judge.CpuLink(Side())
        self.data = (torch.arange(6.0).reshape(2, 3), torch.ones(2, 3))

    def test_profiled_call_is_judged(self):
        r = self.j.link.profile(self.data, False)
        self.assertNotIn("error", r)
        self.assertTrue(torch.equal(r["out"], self.data[0] + 1))
        self.assertIn("aten::add", r["report"])
        self.assertEqual(self.calls, 2)  # one to warm up, one profiled
        reply = self.j.profile(self.data, None)
        self.assertEqual(set(reply), {"report"})
        self.assertIn("Self CPU", reply["report"])

    def test_under_ncu_the_worker_only_marks_the_call(self):
        r = self.j.link.profile(self.data, True)
        self.assertIn("profiled by ncu", r["report"])
        self.assertTrue(torch.equal(r["out"], self.data[0] + 1))

    def test_wrong_output_fails_without_a_report(self):
        self.j.ref.check_implementation = lambda data, output: kbutils.verbose_allclose(output, data[0] - data[1])
        reply = self.j.profile(self.data, None)
        self.assertEqual(set(reply), {"error"})
        self.assertIn("elements differ", reply["error"])

    def test_a_raising_kernel_is_an_error(self):
        def boom(data):
            raise ValueError("no kernel today")

        self.worker.kernel = boom
        reply = self.j.profile(self.data, None)
        self.assertEqual(set(reply), {"error"})
        self.assertIn("no kernel today", reply["error"])


class ProtocolTest(unittest.TestCase):
    """A worker's malformed reply is the submission breaking the protocol
    (a ValueError or wire.Closed), never an exception that would make the
    judge take the blame (exit 115)."""

    def test_metas_refused(self):
        import wire

        for metas, size in (([{"dtype": "float32", "shape": [0, 2**70], "offset": 0, "nbytes": 0}], 0),
                            ([{"dtype": "float32", "shape": [1], "offset": 0, "nbytes": 4.0}], 256),
                            ([{"dtype": "float32", "shape": [True], "offset": 0, "nbytes": 4}], 256),
                            ([{"dtype": "float32", "shape": [1] * 65, "offset": 0, "nbytes": 4}], 256)):
            self.assertNotEqual(wire.check_metas(torch, metas, size), "", metas)

    def test_output_kinds(self):
        import wire

        t = [torch.zeros(1)]
        self.assertIs(wire.unflatten({"t": 0}, t, output=True), t[0])
        for tree in ({"v": 1}, {"dict": [["a", {"t": 0}]]}, {"tuple": [{"v": None}]}):
            with self.assertRaises(ValueError, msg=tree):
                wire.unflatten(tree, t, output=True)

    def test_deep_json_closes_the_channel(self):
        import socket

        import wire

        mine, theirs = wire.Channel.pair()
        self.addCleanup(mine.close)
        self.addCleanup(theirs.close)
        socket.send_fds(theirs.sock, [b'{"a":' + b"[" * 200_000], [])
        with self.assertRaises(wire.Closed):
            mine.recv()

    def test_nonce(self):
        import wire

        n = wire.nonce()
        wire.check_nonce({"nonce": n}, n)
        for reply in ({}, {"nonce": n + 1}):
            with self.assertRaises(ValueError):
                wire.check_nonce(reply, n)


if __name__ == "__main__":
    unittest.main()
