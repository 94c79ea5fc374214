// Connection strings in messages and banners: the password replaced, everything else kept, so a
// log line says where without saying how to get in. A regular expression rather than `new URL`,
// which cannot parse MongoDB's multi-host strings.

export const redactCredentials = (connectionString: string): string => connectionString.replace(/\/\/([^:@/]+):([^@/]*)@/, '//$1:***@');
