package webdav

// route is the route label and log field of every WebDAV request: paths
// are the users' names, so they stay out of labels and logs alike. The
// request metrics and log line are httpserve's, the REST API's families
// taken over when already registered, so one query covers both front ends.
const route = "/webdav/"
