print("bench: not yet implemented")
