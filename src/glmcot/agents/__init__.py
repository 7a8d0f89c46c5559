"""glmcot.agents"""
