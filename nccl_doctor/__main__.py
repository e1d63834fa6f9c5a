import sys

from nccl_doctor.cli import main

sys.exit(main())
