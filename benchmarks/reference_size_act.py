"""An untrained ACT of the reference policy's size (scripts/train_reference's defaults: dim 256, 2 encoder layers,
chunk 30, 10 action steps, 96x72 top frames, no pretrained backbone), saved as LeRobot saves a checkpoint: a policy
that costs per step what the trained reference does, for timing trials without a 25-minute training (issue 60).
Untrained, it never succeeds, so each trial runs to the protocol's time limit: the longest a trial takes.

  .venv/bin/python benchmarks/reference_size_act.py /tmp/act_ref
  .venv/bin/harness run protocols/fixed.yaml --policy /tmp/act_ref --headless --no-video --max-trials 3 \\
      --scoresheet /tmp/ref.yaml --runs-dir /tmp/ref-runs     # "simulated in N s" on each trial's line
"""

from __future__ import annotations

import sys
from pathlib import Path


def save(folder: Path) -> Path:
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    from harness.models.defaults import DEFAULT_START_POSE
    from harness.models.protocol import JOINT_NAMES

    torch.manual_seed(0)
    key = "observation.images.top"
    config = ACTConfig(input_features={"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(6,)),
                                       key: PolicyFeature(type=FeatureType.VISUAL, shape=(3, 72, 96))},
                       output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))},
                       pretrained_backbone_weights=None, dim_model=256, n_encoder_layers=2, chunk_size=30,
                       n_action_steps=10, device="cpu")
    policy = ACTPolicy(config)
    pose = torch.tensor([DEFAULT_START_POSE[n] for n in JOINT_NAMES])
    stats = {"observation.state": {"mean": pose, "std": torch.full((6,), 20.0)},
             "action": {"mean": pose, "std": torch.full((6,), 1.0)},
             key: {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)}}
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    for part in (policy, pre, post):
        part.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    print(save(Path(sys.argv[1] if len(sys.argv) > 1 else "act_ref")))
