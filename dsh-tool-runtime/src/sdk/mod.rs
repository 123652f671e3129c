//! Code-mode SDK generator (SPEC §8): byte-stable TypeScript and Python text for a tool set.
