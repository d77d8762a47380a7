import { runAuthSuite } from '../support/auth-suite'

// Every authenticated route is listed here and runs the shared security suite.
runAuthSuite({ method: 'GET', path: '/api/v1/api-keys', mode: 'admin', okStatus: 200 })
runAuthSuite({ method: 'POST', path: '/api/v1/api-keys', mode: 'admin', body: { name: 'suite' }, okStatus: 201 })
runAuthSuite({ method: 'DELETE', path: '/api/v1/api-keys/00000000-0000-7000-8000-000000000000', mode: 'admin', okStatus: 404 })
