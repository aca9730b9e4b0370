"""One module per placement type (PickAll, PickN, PickFixed), plus what they share."""
