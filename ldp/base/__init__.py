"""The ground floor: errors, validators, time helpers and named catalogs (standard library
only); every other part of the core may import it."""
