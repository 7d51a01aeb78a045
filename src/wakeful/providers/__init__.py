"""Provider protocol and adapters: anthropic, openai, openai-compatible, local, scripted.

Imports only `wakeful.messages`.
"""
