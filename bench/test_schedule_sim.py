#!/usr/bin/env python3
"""Unit tests of bench/schedule_sim.py's parts: the serial resource, the
message-rate, bandwidth, latency and incast terms, UCC tl/mlx5's block sizes
and work-request counts, mlxa2a's rounds, and the claim guard."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import schedule_sim as sim  # noqa: E402

HW = sim.Hw()


class TimelineTest(unittest.TestCase):
    def test_jobs_run_one_at_a_time_and_queueing_is_recorded(self):
        t = sim.Timeline()
        self.assertEqual(t.run(0.0, 2.0), 2.0)
        self.assertEqual(t.run(1.0, 2.0), 4.0)  # ready at 1, starts at 2
        self.assertEqual(t.waited, 1.0)
        self.assertEqual(t.run(10.0, 1.0), 11.0)  # idle gap: starts when ready
        self.assertEqual(t.busy, 5.0)


class NicTermsTest(unittest.TestCase):
    def test_message_rate_bounds_tiny_messages(self):
        nic = sim.Nic(HW)
        n = 1000
        last = max(nic.send(0.0, 1, dma=False) for _ in range(n))
        # 1-byte writes: the link needs 43 B / 25 GB/s = 1.7 ns each, the
        # engine 4.65 ns: the message rate, not the link, sets the pace.
        self.assertAlmostEqual(last, n / HW.msg_per_s, delta=0.01 * n / HW.msg_per_s)
        self.assertGreater(last, n * sim.wire_bytes(HW, 1) / HW.link_bytes_per_s * 2)

    def test_bandwidth_bounds_large_messages_with_packet_headers(self):
        nic = sim.Nic(HW)
        size = 1 << 20
        end = nic.send(0.0, size, dma=False)
        wire = size + (size // HW.mtu) * HW.packet_header_bytes
        self.assertAlmostEqual(end, 1.0 / HW.msg_per_s + wire / HW.link_bytes_per_s, places=12)

    def test_dma_read_precedes_the_link(self):
        a, b = sim.Nic(HW), sim.Nic(HW)
        self.assertGreater(a.send(0.0, 65536), b.send(0.0, 65536, dma=False))

    def test_hops_follow_the_fat_tree_of_40_port_switches(self):
        self.assertEqual([sim.hops(HW, n) for n in (2, 23, 40, 41, 128, 800, 801, 4096)],
                         [1, 1, 1, 3, 3, 3, 5, 5])
        self.assertAlmostEqual(sim.latency(HW, 23), 0.6e-6 + 130e-9)


class IncastTest(unittest.TestCase):
    NODES, MSG = 16, 32 * 32 * 64

    def test_node_order_queues_every_message_at_one_receiver(self):
        _, queued = sim.leader_exchange(HW, self.NODES, self.MSG, 0.0, order=sim.node_order,
                                        symmetric=False)
        one = sim.wire_bytes(HW, self.MSG) / HW.link_bytes_per_s
        # All leaders write to node 0 first (node 1 for node 0 itself): the
        # last of the 15 queues behind the 14 before it.
        self.assertGreater(queued, (self.NODES - 3) * one)

    def test_cyclic_order_has_no_incast(self):
        _, queued = sim.leader_exchange(HW, self.NODES, self.MSG, 0.0, order=sim.cyclic_order,
                                        symmetric=False)
        one = sim.wire_bytes(HW, self.MSG) / HW.link_bytes_per_s
        self.assertLess(queued, one)

    def test_incast_makes_the_call_slower(self):
        fast, _ = sim.leader_exchange(HW, self.NODES, self.MSG, 0.0, sim.cyclic_order, False)
        slow, _ = sim.leader_exchange(HW, self.NODES, self.MSG, 0.0, sim.node_order, False)
        self.assertGreater(slow, fast * 1.2)

    def test_symmetric_shortcut_equals_the_full_simulation_for_a_rotation(self):
        for msg in (32, self.MSG):
            full, _ = sim.leader_exchange(HW, self.NODES, msg, 1e-6, sim.cyclic_order, False)
            one, _ = sim.leader_exchange(HW, self.NODES, msg, 1e-6, sim.cyclic_order, True)
            self.assertAlmostEqual(full, one, places=12)

    def test_cyclic_order_starts_at_the_next_node(self):
        self.assertEqual(sim.cyclic_order(2, 5), [3, 4, 0, 1])
        self.assertEqual(sim.node_order(2, 5), [0, 1, 3, 4])


class TlMlx5Test(unittest.TestCase):
    def test_block_sizes_are_ucc_get_block_size(self):
        got = {m: sim.ucc_block_size(32, m) for m in sim.SEED_SIZES}
        self.assertEqual(got, {1: 32, 2: 32, 4: 32, 8: 32, 16: 16, 32: 16, 64: 8, 128: 8})
        self.assertEqual(sim.ucc_block_size(1, 128), 1)
        for m in sim.SEED_SIZES:  # the transpose unit's 8192-byte limit holds
            b = sim.ucc_block_size(32, m)
            self.assertLessEqual(b * b * m, 8192)

    def test_one_write_per_block_per_remote_node(self):
        nodes, ppn = 5, 32
        cpus, flags, nics = sim.tl_barrier(HW, nodes, 0.0)
        for m, blocks in ((1, 1), (16, 4), (128, 16)):
            _, arr, local, sent = sim.tl_post_node(HW, nodes, ppn, m, 0, cpus[0], flags[0],
                                                   sim.Nic(HW))
            self.assertEqual(sent, (nodes - 1) * blocks)
            self.assertEqual(len(arr), (nodes - 1) * (blocks + 1))  # + one atomic each
            self.assertEqual(len(local), blocks + 1)  # its own node: transposes, atomic

    def test_barrier_flags_come_after_their_post(self):
        cpus, flags, _ = sim.tl_barrier(HW, 4, 2e-6)
        self.assertAlmostEqual(cpus[0], 2e-6 + 3 * HW.post_s)
        self.assertGreater(flags[1][0], 2e-6 + HW.post_s + sim.latency(HW, 4))

    def test_one_device_memory_chunk_waits_for_each_write_to_complete(self):
        nodes = 4
        one = sim.Hw(dm_chunks=1)
        cpus, flags, _ = sim.tl_barrier(one, nodes, 0.0)
        _, arr, _, sent = sim.tl_post_node(one, nodes, 32, 128, 0, cpus[0], flags[0],
                                           sim.Nic(one))
        blocks = sorted(t for t, _, _, tag in arr if tag[0] == "blk")
        gaps = [b - a for a, b in zip(blocks, blocks[1:])]
        # the next block leaves only after the previous one's ACK came back
        self.assertGreater(min(gaps), 2 * sim.latency(one, nodes))
        unbounded, _ = sim.tl_mlx5_call(HW, nodes, 32, 128)
        self.assertGreater(sim.tl_mlx5_call(one, nodes, 32, 128)[0], 2 * unbounded)

    def test_larger_blocks_cost_more(self):
        t1, _ = sim.tl_mlx5_call(HW, 4, 32, 1)
        t128, _ = sim.tl_mlx5_call(HW, 4, 32, 128)
        self.assertGreater(t128, t1)


class Mlxa2aTest(unittest.TestCase):
    def test_rounds_follow_the_staging_slot(self):
        self.assertEqual(sim.mlxa2a_rounds(HW, 23, 32, 128), (1, 128))
        self.assertEqual(sim.mlxa2a_rounds(HW, 128, 32, 128), (4, 32))
        self.assertEqual(sim.mlxa2a_rounds(HW, 4096, 32, 1), (1, 1))
        self.assertEqual(sim.mlxa2a_rounds(HW, 4096, 32, 128), (128, 1))

    def test_copy_scales_with_nodes_and_interpolates(self):
        self.assertAlmostEqual(sim.copy_s(sim.FAN_IN_US, 23, 128), 2.04e-6)
        self.assertAlmostEqual(sim.copy_s(sim.FAN_IN_US, 46, 128), 4.08e-6)
        self.assertAlmostEqual(sim.table_us(sim.FAN_IN_US, 12), (0.27 + 0.335) / 2)

    def test_a_call_is_its_parts(self):
        t, p = sim.mlxa2a_call(HW, 8, 32, 4)
        self.assertAlmostEqual(t, p["fan_in"] + p["exchange"] + p["syncs"] + p["fan_out"])


class GuardTest(unittest.TestCase):
    def test_tolerance_is_35_percent_at_every_size(self):
        seed = list(sim.SEED_TL_MLX5)
        self.assertTrue(sim.reproduced(seed))
        self.assertTrue(sim.reproduced([s * 1.34 for s in seed]))
        self.assertFalse(sim.reproduced([s * 1.36 for s in seed]))
        self.assertFalse(sim.reproduced(seed[:-1] + [seed[-1] * 0.64]))

    def test_claims_must_match_the_simulation(self):
        bad = [1.0] * len(sim.SEED_SIZES)
        good = list(sim.SEED_TL_MLX5)
        no = "Verdict: tl/mlx5 column not reproduced\n"
        yes = "Verdict: tl/mlx5 column reproduced\n"
        self.assertEqual(sim.claim_errors(bad, no, "README"), [])
        self.assertEqual(sim.claim_errors(good, yes, "README"), [])
        self.assertTrue(sim.claim_errors(bad, yes, ""))
        self.assertTrue(sim.claim_errors(good, no, ""))
        self.assertTrue(sim.claim_errors(bad, "no verdict", ""))

    def test_unvalidated_predictions_may_not_be_quoted(self):
        bad = [1.0] * len(sim.SEED_SIZES)
        no = "Verdict: tl/mlx5 column not reproduced\n"
        readme = "The model predicts about 4 µs for mlxa2a at 736 ranks.\n"
        self.assertTrue(sim.claim_errors(bad, no, readme))
        self.assertTrue(sim.claim_errors(bad, no + "| mlxa2a predicted 12.5 us |\n", ""))
        self.assertEqual(sim.claim_errors(bad, no, "mlxa2a: a cost model (bench/model_bench)"), [])


if __name__ == "__main__":
    unittest.main()
