"""What a placement asks with fleet-scheduler.io annotations."""
