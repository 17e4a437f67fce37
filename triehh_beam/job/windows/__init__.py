"""One private discovery per event-time window, as one graph: ``discover --window`` over files and
``triehh stream`` over Pub/Sub, each window's release decided in order before it closes. Imports
every room of ``job`` before it."""
