// Package composecheck holds only tests: they load the repository's compose.yaml with the compose-spec loader and its inline config with Switchyard's own config loader.
package composecheck
