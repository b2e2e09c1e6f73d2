"""The link to the cloud: the MQTT session, the downlink controls and their inbox, progress
confirmations, the status report and the remote sync policy."""
