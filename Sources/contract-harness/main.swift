print("contract-harness: not yet implemented")
