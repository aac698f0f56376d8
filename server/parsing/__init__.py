"""Parsing helpers that both the commands and the services need: write statements and the
leading `$match` of a pipeline. They sit below both so neither imports the other."""

__all__: list[str] = []
