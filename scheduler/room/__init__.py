"""Capacity-aware placement: quantities, requests, fit and allocation scores."""
