"""Adapters that let other agent frameworks keep their state in wakeful's store.

Each adapter is a top-level consumer (like `wakeful.cli`): it imports the store, events and
messages, and nothing imports it. Import the adapter module itself (for example
`wakeful.integrations.openai_agents`); its framework is an optional extra.
"""
