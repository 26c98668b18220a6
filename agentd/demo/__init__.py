"""`agentd demo` and `agentd demo --build`: a real local service (service) breaks and a real daemon
mends it (ops), or builds a document (build), narrated for a first-time user. A surface: may import
everything below the CLI.
"""
