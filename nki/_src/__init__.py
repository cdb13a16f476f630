"""The simulator behind nki.  Private: the public modules (nki, nki.language, nki.isa, ...) take
what they expose from here, so their namespaces hold only the documented API."""
