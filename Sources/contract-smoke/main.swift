print("contract-smoke: not yet implemented")
