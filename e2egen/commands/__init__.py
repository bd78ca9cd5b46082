"""Subcommands of `e2egen`, one module each group."""
from e2egen.commands import accepted_command, arithmetic_command, catalogue_commands, diagnose_commands, init_command, loop_commands, nightly_commands, run_command, rocmlir_command, warm_command

MODULES = (catalogue_commands, run_command, rocmlir_command, nightly_commands, diagnose_commands, loop_commands,
           arithmetic_command, accepted_command, warm_command, init_command)
