"""What a cycle reads of a member cluster: facts, label selectors, eligibility."""
