from topodoctor.cli.commands import run

run()
