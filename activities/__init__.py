"""Temporal activities: thin, idempotent I/O around hub.HubClient and the scheduler."""
