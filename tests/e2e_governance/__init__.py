"""End to end through real Mosquitto and PostgreSQL: governance, staging, replay,
redelivery and a worker killed mid-replay; the cloud is compared with the device's
SQLite ground truth row for row after each step."""
