"""A local run that takes a few seconds (interrupted while followed)."""
import time

print("sleeping", flush=True)
time.sleep(6)
