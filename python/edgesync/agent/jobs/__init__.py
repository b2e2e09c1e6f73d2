"""Jobs the cloud asks for or the backlog needs: uploads (snapshots, spills), re-snapshots,
verification digests and write-back of cloud-authoritative rows."""
