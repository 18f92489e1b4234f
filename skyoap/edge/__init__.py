"""The gRPC edge every role serves through: the server, binding servicers so
that bad input and the project's errors get clear statuses, and the errors a
caller causes."""
