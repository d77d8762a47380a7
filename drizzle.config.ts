import { defineConfig } from 'drizzle-kit'

// drizzle-kit reads this only to generate migrations from src/db/schema.ts into drizzle/.
export default defineConfig({
  dialect: 'turso',
  schema: './src/db/schema.ts',
  out: './drizzle',
  dbCredentials: { url: 'file:./data/drizzle-kit.db' },
})
