from nccl_doctor.cli import console_main

console_main()
