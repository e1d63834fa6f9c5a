"""Stage files: written by each rank, read back by the launcher."""

from nccl_doctor.cluster import stages


def test_stage_files_roundtrip(tmp_path):
    env = {stages.STAGE_DIR_ENV: str(tmp_path)}
    stages.StageFile(0, "n1", env).set("done", code=1)
    stages.StageFile(1, "n1", env).set("all_gather inter 1 MiB")
    assert not stages.StageFile(0, "n1", {}).managed
    records = stages.read_stages(tmp_path)
    assert [(s.rank, s.stage, s.code) for s in records] == [(0, "done", 1), (1, "all_gather inter 1 MiB", None)]


def test_shared_stage_names_are_the_strings_in_stage_files_and_json(tmp_path):
    assert [s.value for s in stages.Stage] == ["init", "done", "failed", "start-up", "rendezvous", "shutdown"]
    stages.StageFile(0, "n1", {stages.STAGE_DIR_ENV: str(tmp_path)}).set(stages.Stage.DONE, code=0)
    assert '"stage": "done"' in (tmp_path / "rank0.json").read_text()
    (record,) = stages.read_stages(tmp_path)
    assert record.stage == stages.Stage.DONE and type(record.stage) is str
