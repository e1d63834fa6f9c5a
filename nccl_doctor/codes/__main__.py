"""``python -m nccl_doctor.codes``: regenerate the code table in ``docs/codes.md`` (run from the repository root)."""

from nccl_doctor.codes import update_table

update_table()
