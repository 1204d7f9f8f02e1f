from topodoctor.cli import run

run()
