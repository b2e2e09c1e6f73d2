"""Helpers shared by the test directories (a package: ``from kits.e2e_kit import …``).

``e2e_kit`` (a real ``edgesync serve``, agents, eventually), ``fault_kit`` (servers a
fault test owns), ``pg_pair`` (a PostgreSQL primary and its streaming standby, failed
over), ``review_helpers``, ``telemetry_payloads``, ``write_load`` (an application writing
while a test runs) and ``import_probe`` (what a fresh interpreter imports). A helper used
by one directory only stays in that directory.
"""
