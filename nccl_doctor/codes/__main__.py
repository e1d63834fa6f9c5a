"""``python -m nccl_doctor.codes``: regenerate the README's code table."""

from nccl_doctor.codes import update_readme

update_readme()
