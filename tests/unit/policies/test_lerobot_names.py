"""Names the harness shares with LeRobot, pinned against the installed LeRobot: a dataset the harness records
says the `robot_type` `lerobot-record` would write for the same arm, and the built-in policies answer to the
names a scoresheet locks."""

from __future__ import annotations

from lerobot.robots.so_follower import SO101Follower

from harness.models.run_settings import SO101_ROBOT_TYPE, BuiltinPolicy
from harness.policies.scripted import ExpertPolicy, ReplayPolicy


def test_datasets_say_the_robot_type_lerobot_record_writes_for_an_so101() -> None:
    # lerobot-record writes `robot_type=robot.name`; an upgrade that renames the class's name fails here
    assert SO101Follower.name == SO101_ROBOT_TYPE


def test_each_builtin_policy_is_named_as_it_is_locked() -> None:
    assert {ExpertPolicy.name, ReplayPolicy.name} == {p.value for p in BuiltinPolicy}
    assert BuiltinPolicy.named("expert") is BuiltinPolicy.EXPERT and BuiltinPolicy.named("runs/ckpt") is None
