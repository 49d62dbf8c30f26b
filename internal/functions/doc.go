// Package functions is the serverless-functions product: a deploy uploads a
// bundle (tar.gz or zip) with a runtime (python or node) and a handler
// (FILE.FUNCTION); the service starts the runtime in a microVM from the
// base template, loads the handler with our runtime shim and snapshots
// that running state as the function's newest version. An invocation
// (isolation "fresh") restores a new microVM from that snapshot, hands the
// event to the shim over a TCP port inside the guest (dialled through the
// guest agent), and kills the microVM afterwards; a deadline kills it too,
// and with it the handler's whole process tree.
package functions
