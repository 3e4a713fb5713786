"""looptool.reward, the one definition of the rewards: LoopTune's GFLOPS gain over the peak and
the log speed-up, one step at a time and over an episode (what replay.rewards hands the
learners), by hand; and the errors for a reward that does not exist or malformed GFLOPS."""

import types
import unittest

import numpy as np

from looptool import reward
from looptool.rl import replay


class RewardTest(unittest.TestCase):

    def test_one_step(self):
        self.assertEqual(reward.reward("dgflops_peak", 20.0, 50.0, 100.0), 0.3)
        self.assertEqual(reward.reward("dgflops_peak", 50.0, 20.0, 100.0), -0.3)
        self.assertIsInstance(reward.reward("dgflops_peak", 1.0, 2.0, 4.0), float)
        self.assertAlmostEqual(reward.reward("dlog_gflops", 10.0, 40.0, 100.0), np.log(4.0))
        # GFLOPS of 0 (a failed measurement) count as 1e-9 in the log.
        self.assertAlmostEqual(reward.reward("dlog_gflops", 0.0, 1.0, 100.0), -np.log(1e-9))

    def test_an_episode_is_its_steps(self):
        gflops = [10.0, 20.0, 20.0, 40.0, 5.0]
        for kind in reward.KINDS:
            per_step = [reward.reward(kind, a, b, 100.0) for a, b in zip(gflops, gflops[1:])]
            episode = reward.episode_rewards(kind, gflops, 100.0)
            self.assertEqual(episode.dtype, np.float32)
            np.testing.assert_allclose(episode, per_step, rtol=1e-6)
        np.testing.assert_allclose(reward.episode_rewards("dgflops_peak", gflops, 100.0),
                                   [0.1, 0.0, 0.2, -0.35], rtol=1e-6)
        # What the learners use is the same function.
        e = types.SimpleNamespace(gflops=np.asarray(gflops), peak=100.0)
        np.testing.assert_array_equal(replay.rewards(e, "dlog_gflops"),
                                      reward.episode_rewards("dlog_gflops", gflops, 100.0))
        self.assertEqual(len(reward.episode_rewards("dgflops_peak", [7.0], 100.0)), 0)

    def test_bad_input(self):
        with self.assertRaisesRegex(ValueError, "Unknown reward 'gflops'; known: dgflops_peak, "
                                                "dlog_gflops"):
            reward.reward("gflops", 1.0, 2.0, 3.0)
        with self.assertRaisesRegex(ValueError, "Unknown reward"):
            reward.episode_rewards("runtime", [1.0, 2.0], 3.0)
        with self.assertRaisesRegex(ValueError, r"one number per state, got shape \(2, 2\)"):
            reward.episode_rewards("dgflops_peak", [[1.0, 2.0], [3.0, 4.0]], 3.0)


if __name__ == "__main__":
    unittest.main()
