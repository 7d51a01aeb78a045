"""One turn: steps, prompt assembly and receipts, tools, durable retry, compaction."""
