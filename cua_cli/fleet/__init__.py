"""Model server fleets: start, supervise, inspect and stop `vllm serve` processes."""
